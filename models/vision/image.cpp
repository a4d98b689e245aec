// Image decoding (PNG with stb_image, JPEG with libjpeg-turbo as PIL does), EXIF orientation, base64 data URLs.
#include "models/vision/image.h"

#include <climits>
#include <cstring>

#include "core/storage.h"
#include "models/vision/jpeg_decode.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#define STB_IMAGE_IMPLEMENTATION  // the one definition in pipit
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_NO_STDIO
#define STBI_FAILURE_USERMSG
#include <stb_image.h>
#pragma GCC diagnostic pop

namespace pipit {

namespace {

bool is_png(std::span<const uint8_t> b) {
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return b.size() >= 8 && std::memcmp(b.data(), sig, 8) == 0;
}
bool is_jpeg(std::span<const uint8_t> b) { return b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF; }

uint16_t rd16(const uint8_t* p, bool le) { return le ? uint16_t(p[0] | p[1] << 8) : uint16_t(p[0] << 8 | p[1]); }
uint32_t rd32(const uint8_t* p, bool le) {
  return le ? uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24
            : uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

// Orientation tag (0x0112) of IFD0 in a TIFF block (the body of an "Exif\0\0" APP1 segment).
int tiff_orientation(const uint8_t* t, size_t n) {
  if (n < 8) return 1;
  bool le;
  if (t[0] == 'I' && t[1] == 'I') le = true;
  else if (t[0] == 'M' && t[1] == 'M') le = false;
  else return 1;
  if (rd16(t + 2, le) != 42) return 1;
  const uint32_t ifd = rd32(t + 4, le);
  if (ifd > n || n - ifd < 2) return 1;
  const uint16_t count = rd16(t + ifd, le);
  for (uint32_t e = 0; e < count; ++e) {
    const size_t off = size_t(ifd) + 2 + size_t(e) * 12;
    if (off + 12 > n) return 1;
    if (rd16(t + off, le) != 0x0112) continue;
    const uint16_t type = rd16(t + off + 2, le);
    if (type != 3 || rd32(t + off + 4, le) < 1) return 1;  // SHORT, count >= 1, value in the entry
    const int v = rd16(t + off + 8, le);
    return v >= 1 && v <= 8 ? v : 1;
  }
  return 1;
}

}  // namespace

namespace {

// Walks the marker segments of a JPEG header up to the first SOS (start of scan). Calls on_segment(marker, body,
// size) for each; returns the offset of the SOS marker, or 0 when the header is malformed or has none.
template <class F>
size_t walk_jpeg_header(std::span<const uint8_t> b, F on_segment) {
  size_t i = 2;
  while (i + 4 <= b.size()) {
    if (b[i] != 0xFF) return 0;
    const uint8_t marker = b[i + 1];
    if (marker == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    if (marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) {  // markers without a length
      i += 2;
      continue;
    }
    if (marker == 0xDA) return i;
    if (marker == 0xD9) return 0;
    const size_t len = size_t(b[i + 2]) << 8 | b[i + 3];
    if (len < 2 || i + 2 + len > b.size()) return 0;
    if (!on_segment(marker, b.data() + i + 4, len - 2)) return 0;
    i += 2 + len;
  }
  return 0;
}

// stb 2.27 memcpy()s a zero-length IDAT chunk from a null buffer (undefined behaviour, though nothing is read).
// Such chunks carry no data, so a copy without them decodes to the same pixels. Empty when there are none. A chunk
// is recognised from its 8-byte header, so one cut off before its CRC at the end of a truncated file goes too.
std::vector<uint8_t> png_without_empty_idat(std::span<const uint8_t> b) {
  auto empty_idat = [&](size_t i) {
    return rd32(b.data() + i, false) == 0 && std::memcmp(b.data() + i + 4, "IDAT", 4) == 0;
  };
  // bytes of the chunk at i (header, data, CRC) when it is whole, else 0
  auto whole = [&](size_t i) -> size_t {
    const size_t len = rd32(b.data() + i, false);
    return len <= b.size() - i - 8 && b.size() - i - 8 - len >= 4 ? 12 + len : 0;
  };
  bool any = false;
  for (size_t i = 8; i + 8 <= b.size();) {
    if (empty_idat(i)) any = true;
    const size_t n = whole(i);
    if (n == 0) break;  // truncated: stb reports it
    i += n;
  }
  std::vector<uint8_t> out;
  if (!any) return out;
  out.assign(b.begin(), b.begin() + 8);
  size_t i = 8;
  while (i + 8 <= b.size()) {
    const size_t n = whole(i);
    if (empty_idat(i)) {
      i += n ? n : b.size() - i;  // dropped, with its CRC when there is one
      continue;
    }
    if (n == 0) break;
    out.insert(out.end(), b.begin() + long(i), b.begin() + long(i + n));
    i += n;
  }
  out.insert(out.end(), b.begin() + long(i), b.end());
  return out;
}

// One DHT segment body (tables back to back: class/id byte, 16 code counts, the symbols). Counts adding up to more
// than 256 symbols make stb 2.27 write past its table (stbi__build_huffman).
bool dht_sane(const uint8_t* seg, size_t n) {
  for (size_t i = 0; i < n;) {
    if (n - i < 17) return false;
    size_t symbols = 0;
    for (size_t k = 0; k < 16; ++k) symbols += seg[i + 1 + k];
    if (symbols > 256 || n - i - 17 < symbols) return false;
    i += 17 + symbols;
  }
  return true;
}

// What stb is given must be a JPEG we can walk: well-formed header segments up to the first scan, every Huffman
// table sane (also those between the scans of a progressive JPEG), and an end-of-image marker (stb pads a JPEG cut
// short with zeros and succeeds; PIL refuses it as truncated). Entropy-coded data never holds FF followed by a
// marker byte (FF bytes are stuffed), so markers after the first scan are found by scanning.
const char* jpeg_problem(std::span<const uint8_t> b) {
  bool tables_ok = true;
  const size_t sos = walk_jpeg_header(b, [&](uint8_t marker, const uint8_t* seg, size_t n) {
    if (marker == 0xC4 && !dht_sane(seg, n)) tables_ok = false;
    return tables_ok;
  });
  if (!tables_ok) return "bad Huffman table";
  if (sos == 0) return "malformed header";
  for (size_t i = sos + 2; i + 1 < b.size(); ++i) {
    if (b[i] != 0xFF) continue;
    const uint8_t m = b[i + 1];
    if (m == 0xD9) return nullptr;  // end of image
    if (m != 0xC4) continue;
    if (i + 4 > b.size()) return "truncated";
    const size_t len = size_t(b[i + 2]) << 8 | b[i + 3];
    if (len < 2 || i + 2 + len > b.size() || !dht_sane(b.data() + i + 4, len - 2)) return "bad Huffman table";
    i += 1 + len;
  }
  return "truncated (no end-of-image marker)";
}

}  // namespace

namespace {

// Width and height from the PNG IHDR or the JPEG SOF header, read before stb so that the size limit gets its own
// message (stb refuses images over 1 GiB with a generic one). False when the header cannot be found.
bool header_size(std::span<const uint8_t> b, bool png, int64_t* w, int64_t* h) {
  if (png) {
    if (b.size() < 24 || std::memcmp(b.data() + 12, "IHDR", 4) != 0) return false;
    *w = rd32(b.data() + 16, false);
    *h = rd32(b.data() + 20, false);
    return true;
  }
  bool found = false;
  walk_jpeg_header(b, [&](uint8_t marker, const uint8_t* seg, size_t n) {
    const bool sof = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (!sof || n < 5) return true;
    *h = rd16(seg + 1, false);
    *w = rd16(seg + 3, false);
    found = true;
    return false;
  });
  return found;
}

}  // namespace

int jpeg_exif_orientation(std::span<const uint8_t> b) {
  if (!is_jpeg(b)) return 1;
  int orientation = 1;
  walk_jpeg_header(b, [&](uint8_t marker, const uint8_t* seg, size_t n) {
    if (marker == 0xE1 && n >= 6 && std::memcmp(seg, "Exif\0\0", 6) == 0) {
      orientation = tiff_orientation(seg + 6, n - 6);
      return false;  // the first EXIF segment decides
    }
    return true;
  });
  return orientation;
}

Image apply_exif_orientation(const Image& in, int o) {
  if (o < 2 || o > 8) return in;
  const int W = in.width, H = in.height;
  const bool swap = o >= 5;  // transpose, rotate 90/270, transverse swap width and height
  Image out;
  out.width = swap ? H : W;
  out.height = swap ? W : H;
  out.rgb.resize(in.rgb.size());
  for (int y = 0; y < out.height; ++y)
    for (int x = 0; x < out.width; ++x) {
      int sx = x, sy = y;  // source pixel of output (x, y)
      switch (o) {
        case 2: sx = W - 1 - x; break;                   // mirror left-right
        case 3: sx = W - 1 - x; sy = H - 1 - y; break;   // rotate 180
        case 4: sy = H - 1 - y; break;                   // flip top-bottom
        case 5: sx = y; sy = x; break;                   // transpose
        case 6: sx = y; sy = H - 1 - x; break;           // rotate 90 clockwise (PIL ROTATE_270)
        case 7: sx = W - 1 - y; sy = H - 1 - x; break;   // transverse
        case 8: sx = W - 1 - y; sy = x; break;           // rotate 90 counter-clockwise (PIL ROTATE_90)
      }
      std::memcpy(out.px(x, y), in.px(sx, sy), 3);
    }
  return out;
}

Result<Image> decode_image(std::span<const uint8_t> bytes, const std::string& what) {
  const bool png = is_png(bytes), jpeg = is_jpeg(bytes);
  if (!png && !jpeg)
    return Error::invalid_argument("[image] {}: not a PNG or JPEG image ({} bytes)", what, bytes.size());
  if (bytes.size() > size_t(INT_MAX)) return Error::invalid_argument("[image] {}: file larger than 2 GiB", what);
  int64_t hw = 0, hh = 0;
  if (header_size(bytes, png, &hw, &hh)) {
    if (hw <= 0 || hh <= 0) return Error::invalid_argument("[image] {}: empty image ({}x{})", what, hw, hh);
    if (hw > kMaxImagePixels / hh)  // no overflow: PNG sides go up to 2^31 - 1
      return Error::invalid_argument("[image] {}: {}x{} pixels is more than the limit of {} (PIL's decompression "
                                     "bomb limit); downscale it first", what, hw, hh, kMaxImagePixels);
  }
  if (jpeg)
    if (const char* problem = jpeg_problem(bytes))
      return Error::invalid_argument("[image] {}: corrupt JPEG: {}", what, problem);
  if (jpeg && jpeg_decoder_available()) {
    PIPIT_ASSIGN_OR_RETURN(Image img, decode_jpeg(bytes, what));
    const int o = jpeg_exif_orientation(bytes);
    return o == 1 ? img : apply_exif_orientation(img, o);
  }
  std::vector<uint8_t> cleaned = png ? png_without_empty_idat(bytes) : std::vector<uint8_t>();
  if (!cleaned.empty()) bytes = cleaned;
  const int len = int(bytes.size());
  int w = 0, h = 0, comp = 0;
  if (!stbi_info_from_memory(bytes.data(), len, &w, &h, &comp))
    return Error::invalid_argument("[image] {}: cannot read the {} header: {}", what, png ? "PNG" : "JPEG",
                                   stbi_failure_reason());
  if (w <= 0 || h <= 0) return Error::invalid_argument("[image] {}: empty image ({}x{})", what, w, h);
  if (int64_t(w) * h > kMaxImagePixels)
    return Error::invalid_argument("[image] {}: {}x{} is {} pixels, more than the limit of {} (PIL's decompression "
                                   "bomb limit); downscale it first", what, w, h, int64_t(w) * h, kMaxImagePixels);

  Image img;
  img.width = w;
  img.height = h;
  img.rgb.resize(size_t(w) * size_t(h) * 3);
  int dw = 0, dh = 0, dc = 0;
  if (png && comp == 1 && stbi_is_16_bit_from_memory(bytes.data(), len)) {
    // PIL opens a 16-bit grey PNG as mode "I"; convert("RGB") clamps to 255 (stb would shift right by 8)
    stbi_us* p = stbi_load_16_from_memory(bytes.data(), len, &dw, &dh, &dc, 1);
    if (!p) return Error::invalid_argument("[image] {}: cannot decode PNG: {}", what, stbi_failure_reason());
    for (size_t i = 0; i < size_t(w) * size_t(h); ++i) {
      const uint8_t v = p[i] > 255 ? 255 : uint8_t(p[i]);
      img.rgb[3 * i] = img.rgb[3 * i + 1] = img.rgb[3 * i + 2] = v;
    }
    stbi_image_free(p);
  } else {
    // req_comp 3: grey replicated, alpha dropped, palette looked up, 16-bit channels reduced to their high byte
    stbi_uc* p = stbi_load_from_memory(bytes.data(), len, &dw, &dh, &dc, 3);
    if (!p)
      return Error::invalid_argument("[image] {}: cannot decode {}: {}", what, png ? "PNG" : "JPEG",
                                     stbi_failure_reason());
    std::memcpy(img.rgb.data(), p, img.rgb.size());
    stbi_image_free(p);
  }
  if (dw != w || dh != h) return Error::internal("[image] {}: header says {}x{}, decoded {}x{}", what, w, h, dw, dh);
  if (jpeg) {
    const int o = jpeg_exif_orientation(bytes);
    if (o != 1) img = apply_exif_orientation(img, o);
  }
  return img;
}

Result<std::vector<uint8_t>> decode_base64(std::string_view s) {
  std::vector<uint8_t> out;
  out.reserve(s.size() / 4 * 3 + 3);
  uint32_t acc = 0;
  int bits = 0;
  bool padding = false;
  for (char c : s) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+' || c == '-') v = 62;
    else if (c == '/' || c == '_') v = 63;
    else if (c == '=') { padding = true; continue; }
    else if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    else return Error::invalid_argument("[image] base64: unexpected character '{}'", c);
    if (padding) return Error::invalid_argument("[image] base64: data after '=' padding");
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(uint8_t(acc >> bits));
      acc &= (1u << bits) - 1;
    }
  }
  if (bits >= 6) return Error::invalid_argument("[image] base64: truncated input");
  return out;
}

Result<Image> load_image(const std::string& source) {
  if (source.rfind("data:", 0) == 0) {
    const size_t comma = source.find(',');
    if (comma == std::string::npos || source.substr(0, comma).find(";base64") == std::string::npos)
      return Error::invalid_argument("[image] data URL: expected 'data:image/<type>;base64,<data>'");
    PIPIT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, decode_base64(std::string_view(source).substr(comma + 1)));
    return decode_image(bytes, "data URL");
  }
  if (!file_exists(source)) return Error::not_found("[image] '{}': no such file", source);
  if (is_directory(source)) return Error::invalid_argument("[image] '{}' is a directory, expected an image file", source);
  PIPIT_ASSIGN_OR_RETURN(std::string data, read_file(source));
  return decode_image(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()), source);
}

}  // namespace pipit
