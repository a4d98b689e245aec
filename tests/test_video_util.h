// Test clips written with FFmpeg's encoders (builds with PIPIT_WITH_FFMPEG): frames -> a lossless FFV1 video in an
// AVI file, so that decoding gives the frames back bit for bit.
#pragma once

#include <string>
#include <vector>

#include "models/vision/image.h"

#ifdef PIPIT_WITH_FFMPEG
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libswscale/swscale.h>
}
#endif

namespace pipit::test {

// False when the clip could not be written (or the build has no FFmpeg).
inline bool write_lossless_clip(const std::string& path, const std::vector<Image>& frames, int fps) {
#ifndef PIPIT_WITH_FFMPEG
  return false;
#else
  if (frames.empty()) return false;
  const int w = frames[0].width, h = frames[0].height;
  AVFormatContext* fmt = nullptr;
  if (avformat_alloc_output_context2(&fmt, nullptr, "avi", path.c_str()) < 0) return false;
  const AVCodec* codec = avcodec_find_encoder(AV_CODEC_ID_FFV1);
  AVStream* st = codec ? avformat_new_stream(fmt, nullptr) : nullptr;
  AVCodecContext* enc = codec ? avcodec_alloc_context3(codec) : nullptr;
  AVFrame* frame = av_frame_alloc();
  AVPacket* pkt = av_packet_alloc();
  SwsContext* sws = sws_getContext(w, h, AV_PIX_FMT_RGB24, w, h, AV_PIX_FMT_BGR0, SWS_POINT, nullptr, nullptr, nullptr);
  bool ok = st && enc && frame && pkt && sws;
  if (ok) {
    enc->width = w;
    enc->height = h;
    enc->pix_fmt = AV_PIX_FMT_BGR0;
    enc->time_base = AVRational{1, fps};
    st->time_base = enc->time_base;
    st->avg_frame_rate = AVRational{fps, 1};
    ok = avcodec_open2(enc, codec, nullptr) >= 0 && avcodec_parameters_from_context(st->codecpar, enc) >= 0 &&
         avio_open(&fmt->pb, path.c_str(), AVIO_FLAG_WRITE) >= 0 && avformat_write_header(fmt, nullptr) >= 0;
  }
  auto drain = [&]() {
    while (avcodec_receive_packet(enc, pkt) == 0) {
      av_packet_rescale_ts(pkt, enc->time_base, st->time_base);
      pkt->stream_index = st->index;
      if (av_interleaved_write_frame(fmt, pkt) < 0) ok = false;
    }
  };
  for (size_t i = 0; ok && i < frames.size(); ++i) {
    frame->format = AV_PIX_FMT_BGR0;
    frame->width = w;
    frame->height = h;
    ok = av_frame_get_buffer(frame, 0) >= 0;
    const uint8_t* src[1] = {frames[i].rgb.data()};
    const int stride[1] = {w * 3};
    ok = ok && sws_scale(sws, src, stride, 0, h, frame->data, frame->linesize) == h;
    frame->pts = int64_t(i);
    ok = ok && avcodec_send_frame(enc, frame) >= 0;
    av_frame_unref(frame);
    drain();
  }
  if (ok) {
    avcodec_send_frame(enc, nullptr);
    drain();
    ok = av_write_trailer(fmt) >= 0;
  }
  sws_freeContext(sws);
  av_packet_free(&pkt);
  av_frame_free(&frame);
  avcodec_free_context(&enc);
  if (fmt && fmt->pb) avio_closep(&fmt->pb);
  avformat_free_context(fmt);
  return ok;
#endif
}

}  // namespace pipit::test
