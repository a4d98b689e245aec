// JPEG decoding with libjpeg-turbo, the library PIL uses, so that JPEG inputs give HF's pixel_values exactly.
// libjpeg reports fatal errors through error_exit, which must not return: ours longjmps back to the one function
// that calls libjpeg, which turns the message into a Status. Nothing in that function needs a destructor.
#include "models/vision/jpeg_decode.h"

#if PIPIT_WITH_LIBJPEG

#include <csetjmp>
#include <cstdio>  // jpeglib.h uses FILE and size_t without including their headers
#include <cstring>

#include <jpeglib.h>
#include <jerror.h>  // after jpeglib.h: the message codes

namespace pipit {

namespace {

struct ErrorManager {
  jpeg_error_mgr pub;  // first: libjpeg hands error_exit the address of this member as cinfo->err
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void on_error(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<ErrorManager*>(cinfo->err);
  cinfo->err->format_message(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings (level -1) come on corrupt entropy-coded data; PIL silences them (its output_message does nothing) and
// keeps the pixels libjpeg makes of it, so we do too. The exception is data that ends before the image does:
// jpeg_mem_src warns JWRN_JPEG_EOF and pretends an end marker, where PIL's suspending reader runs out and raises
// "image file is truncated".
void on_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) on_error(cinfo);
}

// A progressive JPEG may hold any number of scans, each a pass over the whole image's coefficients: 320 KB of 20,000
// empty scans decoded for 17 s. Real files have about ten (libjpeg's own progressive scripts write 10; djpeg's
// -maxscans guards the same way); past kMaxScans the file is refused.
constexpr int kMaxScans = 1000;

void on_progress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (cinfo->is_decompressor && d->input_scan_number > kMaxScans) {
    auto* e = reinterpret_cast<ErrorManager*>(cinfo->err);
    std::snprintf(e->message, sizeof e->message, "more than %d progressive scans (a real JPEG has about ten)",
                  kMaxScans);
    std::longjmp(e->jump, 1);
  }
}

struct Decoder {
  jpeg_decompress_struct cinfo{};
  ErrorManager err{};
  jpeg_progress_mgr progress{};
  const char* problem = nullptr;  // a failure found by our own checks (libjpeg's go to err.message)
};

// Pillow's MULDIV255: a * b / 255 rounded, in integers (libImaging/ImagingUtils.h).
inline int muldiv255(int a, int b) {
  const int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

// One row of libjpeg's CMYK to RGB as Pillow does it. JpegImagePlugin reads every 4-component JPEG with rawmode
// "CMYK;I" (Adobe Photoshop stores inverted ink), so each byte is first inverted; then Convert.c's cmyk2rgb:
// R = (255 - K) - C * (255 - K) / 255, the same for G (M) and B (Y).
void cmyk_row_to_rgb(const uint8_t* in, uint8_t* out, int width) {
  for (int x = 0; x < width; ++x, in += 4, out += 3) {
    const int k = 255 - in[3], nk = 255 - k;
    for (int ch = 0; ch < 3; ++ch) {
      const int v = nk - muldiv255(255 - in[ch], nk);  // 255 - in[ch]: C, M or Y
      out[ch] = uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
    }
  }
}

// Decodes into `img`, using `row` for the non-RGB outputs. False on failure (d.problem or d.err.message says why).
// A longjmp from libjpeg comes back to the setjmp below: no object with a destructor may be created after it, and
// what is read after the jump lives in `d`, not in locals.
bool run_libjpeg(Decoder& d, std::span<const uint8_t> bytes, Image& img, std::vector<uint8_t>& row) {
  jpeg_decompress_struct& c = d.cinfo;
  c.err = jpeg_std_error(&d.err.pub);
  d.err.pub.error_exit = on_error;
  d.err.pub.emit_message = on_message;
  if (setjmp(d.err.jump)) return false;
  jpeg_create_decompress(&c);
  d.progress.progress_monitor = on_progress;
  c.progress = &d.progress;
  jpeg_mem_src(&c, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&c, TRUE);  // errors (not returns) on a stream of tables only

  if (int64_t(c.image_width) * int64_t(c.image_height) > kMaxImagePixels) {
    d.problem = "more pixels than the limit";  // the caller has checked this from the header already
    return false;
  }
  // JpegImagePlugin's SOF handler: 1 component is mode "L", 3 "RGB", 4 "CMYK"; any other count is refused. It sets
  // no jpeg_color_space, so libjpeg's guess from the JFIF/Adobe markers stands (YCbCr, RGB, CMYK or YCCK).
  switch (c.num_components) {
    case 1: c.out_color_space = JCS_GRAYSCALE; break;
    case 3: c.out_color_space = JCS_RGB; break;  // Pillow asks for RGBX: the same values with a pad byte
    case 4: c.out_color_space = JCS_CMYK; break;
    default: d.problem = "unsupported number of components (PIL reads 1, 3 or 4)"; return false;
  }
  // Pillow's settings when not in draft mode, which are libjpeg's defaults; set here so that they are on record.
  c.dct_method = JDCT_ISLOW;
  c.do_fancy_upsampling = TRUE;
  c.scale_num = c.scale_denom = 1;
  jpeg_start_decompress(&c);  // a progressive JPEG is read whole here

  const int w = int(c.output_width), h = int(c.output_height), n = c.output_components;
  if (w != int(c.image_width) || h != int(c.image_height) || n != c.num_components) {
    d.problem = "libjpeg's output does not have the header's size";
    return false;
  }
  img.width = w;
  img.height = h;
  img.rgb.resize(size_t(w) * size_t(h) * 3);
  row.resize(size_t(w) * size_t(n));
  while (c.output_scanline < c.output_height) {
    uint8_t* out = img.rgb.data() + size_t(c.output_scanline) * size_t(w) * 3;
    JSAMPROW dst = n == 3 ? out : row.data();
    if (jpeg_read_scanlines(&c, &dst, 1) != 1) {
      d.problem = "libjpeg returned no scanline";
      return false;
    }
    if (n == 1) {
      for (int x = 0; x < w; ++x) out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = row[size_t(x)];
    } else if (n == 4) {
      cmyk_row_to_rgb(row.data(), out, w);
    }
  }
  jpeg_finish_decompress(&c);
  return true;
}

}  // namespace

bool jpeg_decoder_available() { return true; }

Result<Image> decode_jpeg(std::span<const uint8_t> bytes, const std::string& what) {
  Decoder d;
  Image img;
  std::vector<uint8_t> row;
  const bool ok = run_libjpeg(d, bytes, img, row);
  jpeg_destroy_decompress(&d.cinfo);  // also after a failed create: it frees only what was allocated
  if (ok) return img;
  return Error::invalid_argument("[image] {}: cannot decode JPEG: {}", what,
                                 d.problem ? d.problem : d.err.message);
}

}  // namespace pipit

#else  // built without libjpeg: decode_image uses stb for JPEG

namespace pipit {

bool jpeg_decoder_available() { return false; }

Result<Image> decode_jpeg(std::span<const uint8_t>, const std::string& what) {
  return Error::unsupported("[image] {}: pipit was built without libjpeg", what);
}

}  // namespace pipit

#endif
