// libpipit_video.so: video files decoded with FFmpeg's libraries (Debian's libavformat, libavcodec, libswscale),
// loaded by VideoFile at the first video file (models/vision/video_decoder.h says why it is a module). Frames come
// out as PyAV's `to_ndarray("rgb24")` gives them (libswscale, bilinear flag, the stream's own colour details) and
// the clip's frame count and rate are its header's (`stream.frames`, `stream.average_rate`), what HF's video loader
// hands its sampler. Only the frames asked for are converted; a distant one is reached by a keyframe seek.
#include <cmath>
#include <cstring>
#include <utility>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avutil.h>
#include <libavutil/imgutils.h>
#include <libavutil/log.h>
#include <libswscale/swscale.h>
}

#include "models/vision/video_decoder.h"
#include "models/vision/video_file.h"  // kMaxVideoSeconds

namespace pipit {

namespace {

// The containers a user's clip comes in. No playlist (hls, dash, concat) or image-sequence demuxer: those open
// further files or URLs named inside the input.
constexpr const char* kFormats = "mov,matroska,avi,mpegts,mpeg,ogg,flv,asf,webm_dash_manifest";
// What FFmpeg prints on its own goes nowhere: every failure comes back as an error naming the input.
void quiet_ffmpeg() {
  static const bool once = [] {
    av_log_set_level(AV_LOG_QUIET);
    return true;
  }();
  (void)once;
}

std::string av_error(int code) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(code, buf, sizeof(buf));
  return buf;
}

// Bytes in memory as FFmpeg's input (a data URL's video).
struct MemoryInput {
  std::vector<uint8_t> bytes;
  int64_t pos = 0;
  static int read(void* opaque, uint8_t* buf, int n) {
    auto* m = static_cast<MemoryInput*>(opaque);
    const int64_t left = int64_t(m->bytes.size()) - m->pos;
    if (left <= 0) return AVERROR_EOF;
    const int take = int(std::min<int64_t>(left, n));
    std::memcpy(buf, m->bytes.data() + m->pos, size_t(take));
    m->pos += take;
    return take;
  }
  static int64_t seek(void* opaque, int64_t offset, int whence) {
    auto* m = static_cast<MemoryInput*>(opaque);
    const int64_t size = int64_t(m->bytes.size());
    if (whence & AVSEEK_SIZE) return size;
    int64_t to = offset;
    switch (whence & ~AVSEEK_FORCE) {
      case SEEK_SET: break;
      case SEEK_CUR: to = m->pos + offset; break;
      case SEEK_END: to = size + offset; break;
      default: return -1;
    }
    if (to < 0 || to > size) return -1;
    m->pos = to;
    return to;
  }
};

}  // namespace

struct FfmpegState {
  std::string what;
  std::unique_ptr<MemoryInput> memory;
  AVIOContext* io = nullptr;
  AVFormatContext* fmt = nullptr;
  AVCodecContext* dec = nullptr;
  AVPacket* pkt = nullptr;
  AVFrame* frm = nullptr;
  SwsContext* sws = nullptr;
  int stream = -1;
  double fps = 0;
  int64_t start_pts = 0;  // the stream's first timestamp (frame 0)
  // Frames are counted while decoding from the start; after a seek their index comes from their timestamp.
  int64_t next_index = 0;  // index of the next frame the decoder gives (counting mode)
  bool seeked = false;
  bool eof = false;
  Image last;              // the last frame converted (a header that promises too many frames gives it again)
  int64_t last_index = -1;
  int64_t last_pts = AV_NOPTS_VALUE;  // timestamp of the last frame decoded

  ~FfmpegState() {
    sws_freeContext(sws);
    av_frame_free(&frm);
    av_packet_free(&pkt);
    avcodec_free_context(&dec);
    avformat_close_input(&fmt);  // does not free a custom io
    if (io) {
      av_freep(&io->buffer);
      avio_context_free(&io);
    }
  }

  Status fail(const std::string& msg) const { return Error::invalid_argument("[video] {}: {}", what, msg); }

  int64_t index_of(const AVFrame* f) {
    const int64_t pts = f->best_effort_timestamp;
    if (!seeked || pts == AV_NOPTS_VALUE) return next_index;
    const AVRational tb = fmt->streams[stream]->time_base;
    return std::llround(double(pts - start_pts) * av_q2d(tb) * fps);
  }

  Result<Image> to_rgb(const AVFrame* f) {
    if (f->width != dec->width || f->height != dec->height)
      return fail(pipit::fmt("frame size changed from {}x{} to {}x{} inside the clip", dec->width, dec->height,
                              f->width, f->height));
    // PyAV's to_ndarray("rgb24"): sws_scale to RGB24 at the same size, bilinear flag, default colour details
    sws = sws_getCachedContext(sws, f->width, f->height, AVPixelFormat(f->format), f->width, f->height,
                               AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr);
    if (!sws) return fail(pipit::fmt("cannot convert pixel format {} to RGB",
                                      av_get_pix_fmt_name(AVPixelFormat(f->format)) ?: "?"));
    Image img;
    img.width = f->width;
    img.height = f->height;
    img.rgb.resize(size_t(f->width) * size_t(f->height) * 3);
    uint8_t* dst[4] = {img.rgb.data(), nullptr, nullptr, nullptr};
    int stride[4] = {f->width * 3, 0, 0, 0};
    if (sws_scale(sws, f->data, f->linesize, 0, f->height, dst, stride) != f->height)
      return fail("colour conversion failed");
    return img;
  }

  // Decodes the next frame into frm; false at the end of the stream.
  Result<bool> decode_next() {
    for (;;) {
      int r = avcodec_receive_frame(dec, frm);
      if (r == 0) return true;
      if (r == AVERROR_EOF) return false;
      if (r != AVERROR(EAGAIN)) return fail("cannot decode a frame (" + av_error(r) + ")");
      if (eof) return false;
      r = av_read_frame(fmt, pkt);
      if (r == AVERROR_EOF) {
        eof = true;
        avcodec_send_packet(dec, nullptr);  // drain
        continue;
      }
      if (r < 0) return fail("cannot read the file (" + av_error(r) + ")");
      if (pkt->stream_index == stream) {
        r = avcodec_send_packet(dec, pkt);
        av_packet_unref(pkt);
        if (r < 0 && r != AVERROR(EAGAIN) && r != AVERROR_INVALIDDATA)
          return fail("cannot decode a packet (" + av_error(r) + ")");
      } else {
        av_packet_unref(pkt);
      }
    }
  }

  int64_t ts_of(int64_t index) const {
    return start_pts + int64_t(std::floor(double(index) / fps / av_q2d(fmt->streams[stream]->time_base)));
  }

  // Whether a keyframe seek reaches frame `index` with less decoding than going on from the current frame: with the
  // container's index (MP4, MKV with cues, ...), when the keyframe at or before it lies after the current frame;
  // without one, when it is over two seconds ahead.
  bool worth_seeking(int64_t index) {
    const int64_t ahead = index - (seeked ? last_index + 1 : next_index);
    if (ahead <= 0) return false;
    AVStream* st = fmt->streams[stream];
    if (avformat_index_get_entries_count(st) > 0) {
      const AVIndexEntry* e = avformat_index_get_entry_from_timestamp(st, ts_of(index), AVSEEK_FLAG_BACKWARD);
      return e && e->timestamp > (last_pts == AV_NOPTS_VALUE ? start_pts : last_pts);
    }
    return ahead > int64_t(std::ceil(2 * fps)) + 1;
  }

  // Goes to the keyframe at or before frame `index`.
  void seek_to(int64_t index) {
    if (av_seek_frame(fmt, stream, ts_of(index), AVSEEK_FLAG_BACKWARD) < 0) return;  // not seekable: decode on
    avcodec_flush_buffers(dec);
    eof = false;
    seeked = true;
  }
};

namespace {

Result<std::unique_ptr<FfmpegState>> open_impl(const std::string& path, std::vector<uint8_t>* bytes,
                                                   const std::string& what) {
  quiet_ffmpeg();
  auto im = std::make_unique<FfmpegState>();
  im->what = what;
  im->fmt = avformat_alloc_context();
  if (!im->fmt) return Error::unavailable("[video] {}: out of memory", what);
  AVDictionary* opts = nullptr;
  av_dict_set(&opts, "format_whitelist", kFormats, 0);
  if (bytes) {
    im->memory = std::make_unique<MemoryInput>();
    im->memory->bytes = std::move(*bytes);
    constexpr int kBuf = 1 << 16;
    auto* buf = static_cast<uint8_t*>(av_malloc(kBuf));
    im->io = buf ? avio_alloc_context(buf, kBuf, 0, im->memory.get(), &MemoryInput::read, nullptr, &MemoryInput::seek)
                 : nullptr;
    if (!im->io) {
      av_free(buf);
      av_dict_free(&opts);
      return Error::unavailable("[video] {}: out of memory", what);
    }
    im->fmt->pb = im->io;
    im->fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
    av_dict_set(&opts, "protocol_whitelist", "none", 0);  // nothing the bytes name is opened
  } else {
    av_dict_set(&opts, "protocol_whitelist", "file", 0);
  }
  // FFmpeg frees the context when opening fails
  int r = avformat_open_input(&im->fmt, bytes ? nullptr : path.c_str(), nullptr, &opts);
  av_dict_free(&opts);
  if (r < 0) {
    im->fmt = nullptr;
    return Error::invalid_argument("[video] {}: not a video file pipit reads ({}; containers: MP4/MOV, WebM/MKV, AVI, "
                                   "MPEG-TS/PS, OGG, FLV, ASF)", what, av_error(r));
  }
  im->fmt->probesize = 5 << 20;
  if ((r = avformat_find_stream_info(im->fmt, nullptr)) < 0)
    return im->fail("cannot read the stream information (" + av_error(r) + ")");
  const AVCodec* codec = nullptr;
  im->stream = av_find_best_stream(im->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
  if (im->stream == AVERROR_STREAM_NOT_FOUND) return im->fail("the file has no video stream");
  if (im->stream < 0 || !codec) return im->fail("no decoder for its video codec in this FFmpeg build");
  AVStream* st = im->fmt->streams[im->stream];
  const AVCodecParameters* par = st->codecpar;
  if (par->width <= 0 || par->height <= 0) return im->fail("the video stream has no frame size");
  if (int64_t(par->width) * int64_t(par->height) > kMaxImagePixels)
    return im->fail(pipit::fmt("frames of {}x{} pixels, more than the {} a frame may have", par->width, par->height,
                                kMaxImagePixels));
  AVRational rate = st->avg_frame_rate.num > 0 && st->avg_frame_rate.den > 0 ? st->avg_frame_rate : st->r_frame_rate;
  if (rate.num <= 0 || rate.den <= 0) return im->fail("the video stream has no frame rate");
  im->fps = av_q2d(rate);
  if (!(im->fps > 0) || !std::isfinite(im->fps) || im->fps > 1000)
    return im->fail(pipit::fmt("frame rate {} is not one a video has", im->fps));
  double seconds = st->duration != AV_NOPTS_VALUE && st->duration > 0 ? double(st->duration) * av_q2d(st->time_base)
                   : im->fmt->duration > 0                            ? double(im->fmt->duration) / AV_TIME_BASE
                                                                      : 0.0;
  int64_t n = st->nb_frames > 0 ? st->nb_frames : int64_t(std::llround(seconds * im->fps));
  if (seconds <= 0) seconds = double(n) / im->fps;
  if (seconds > kMaxVideoSeconds || double(n) / im->fps > kMaxVideoSeconds)
    return im->fail(pipit::fmt("the clip lasts {} s, more than the {} s pipit reads: trim it first",
                                std::llround(std::max(seconds, double(n) / im->fps)), std::llround(kMaxVideoSeconds)));
  if (n < 1) return im->fail("the video stream has no frames");
  im->start_pts = st->start_time != AV_NOPTS_VALUE ? st->start_time : 0;

  im->dec = avcodec_alloc_context3(codec);
  if (!im->dec) return Error::unavailable("[video] {}: out of memory", what);
  if ((r = avcodec_parameters_to_context(im->dec, par)) < 0) return im->fail("bad codec parameters (" + av_error(r) + ")");
  im->dec->thread_count = 1;  // the caller's pool is busy with the tower; decoding is sequential anyway
  if ((r = avcodec_open2(im->dec, codec, nullptr)) < 0)
    return im->fail(pipit::fmt("cannot open the {} decoder ({})", codec->name, av_error(r)));
  im->pkt = av_packet_alloc();
  im->frm = av_frame_alloc();
  if (!im->pkt || !im->frm) return Error::unavailable("[video] {}: out of memory", what);
  // the count the decoder reports (the header's, or duration x rate)
  st->nb_frames = n;
  return im;
}

// VideoDecoder over an FfmpegState.
class FfmpegDecoder final : public VideoDecoder {
 public:
  explicit FfmpegDecoder(std::unique_ptr<FfmpegState> st) : st_(std::move(st)) {}
  int64_t n_frames() const override { return st_->fmt->streams[st_->stream]->nb_frames; }
  double fps() const override { return st_->fps; }
  int width() const override { return st_->fmt->streams[st_->stream]->codecpar->width; }
  int height() const override { return st_->fmt->streams[st_->stream]->codecpar->height; }
  std::string codec() const override { return st_->dec->codec->name; }
  Result<Image> frame(int32_t index) override {
    FfmpegState& i = *st_;
    if (index < 0 || index < i.last_index)
      return Error::invalid_argument("[video] {}: frame {} asked after frame {} (frames go forward)", i.what, index,
                                     i.last_index);
    if (index == i.last_index) return i.last;
    if (i.worth_seeking(index)) i.seek_to(index);
    for (;;) {
      PIPIT_ASSIGN_OR_RETURN(bool got, i.decode_next());
      if (!got) {
        if (i.last_index < 0) return i.fail("the video stream has no decodable frames");
        return i.last;  // the header promised more frames than there are
      }
      const int64_t at = i.index_of(i.frm);
      ++i.next_index;
      i.last_pts = i.frm->best_effort_timestamp;
      if (at < index) {
        av_frame_unref(i.frm);
        continue;
      }
      auto img = i.to_rgb(i.frm);
      av_frame_unref(i.frm);
      if (!img.is_ok()) return img.status();
      i.last = std::move(img).value();
      i.last_index = index;
      return i.last;
    }
  }

 private:
  std::unique_ptr<FfmpegState> st_;
};

}  // namespace

Result<std::unique_ptr<VideoDecoder>> open_video_decoder_ffmpeg(const std::string& path, std::vector<uint8_t>* bytes,
                                                                const std::string& what) {
  if (bytes && bytes->empty()) return Error::invalid_argument("[video] {}: empty", what);
  PIPIT_ASSIGN_OR_RETURN(std::unique_ptr<FfmpegState> st, open_impl(path, bytes, what));
  return std::unique_ptr<VideoDecoder>(new FfmpegDecoder(std::move(st)));
}

}  // namespace pipit

// The module's entry point (models/vision/video_decoder.h): C linkage so that dlsym finds it by name.
extern "C" __attribute__((visibility("default"))) const void* pipit_video_module_v1() {
  return reinterpret_cast<const void*>(&pipit::open_video_decoder_ffmpeg);
}
