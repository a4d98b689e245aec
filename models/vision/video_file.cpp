// VideoFile (see video_file.h): the FFmpeg module (libpipit_video.so) loaded once, at the first video file, and
// each clip decoded through it.
#include "models/vision/video_file.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <utility>

#include "models/vision/video_decoder.h"

namespace pipit {

bool is_video_data_url(const std::string& source) { return source.rfind("data:video/", 0) == 0; }

namespace {

constexpr const char* kModuleName = "libpipit_video.so";

struct Module {
  OpenVideoDecoderFn open = nullptr;
  std::string error;  // why `open` is null
};

// The directory of the shared object or program that holds this code (libpipit.so, pipit, a Python extension).
std::string own_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_directory), &info) == 0 || !info.dli_fname) return "";
  std::error_code ec;
  const auto p = std::filesystem::weakly_canonical(info.dli_fname, ec);
  return ec ? "" : p.parent_path().string();
}

Module load_module() {
  Module m;
#ifndef PIPIT_VIDEO_MODULE_BUILD_DIR
  m.error = "this build of pipit decodes no video files (built without FFmpeg's libraries)";
#else
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("PIPIT_VIDEO_MODULE"); env && *env) candidates.push_back(env);
  if (const std::string dir = own_directory(); !dir.empty()) candidates.push_back(dir + "/" + kModuleName);
  for (const char* dir : {PIPIT_VIDEO_MODULE_BUILD_DIR, PIPIT_VIDEO_MODULE_INSTALL_DIR})
    candidates.push_back(std::string(dir) + "/" + kModuleName);
  std::string tried;
  for (const auto& path : candidates) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept open for the life of the process
    if (!h) {
      const char* e = dlerror();
      m.error = fmt("{} does not load ({})", path, e ? e : "?");
      return m;
    }
    auto entry = reinterpret_cast<const void* (*)()>(dlsym(h, PIPIT_VIDEO_MODULE_ENTRY));
    if (!entry) {
      m.error = fmt("{} is not pipit's video module (no {})", path, PIPIT_VIDEO_MODULE_ENTRY);
      return m;
    }
    m.open = reinterpret_cast<OpenVideoDecoderFn>(entry());
    return m;
  }
  m.error = fmt("pipit's video module ({}, FFmpeg) is not installed: looked for {}", kModuleName, tried);
#endif
  return m;
}

const Module& module() {
  static const Module m = load_module();  // thread-safe, once
  return m;
}

Status no_decoder(const std::string& what) {
  return Error::unsupported("[video] {}: {}; give the frames as images instead", what, module().error);
}

}  // namespace

bool video_files_supported() { return module().open != nullptr; }

VideoFile::VideoFile(std::unique_ptr<VideoDecoder> dec) : dec_(std::move(dec)) {
  n_frames_ = dec_->n_frames();
  fps_ = dec_->fps();
  width_ = dec_->width();
  height_ = dec_->height();
  codec_ = dec_->codec();
}

VideoFile::~VideoFile() = default;

Result<std::unique_ptr<VideoFile>> VideoFile::open(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return Error::invalid_argument("[video] {}: no such file", path);
  if (!module().open) return no_decoder(path);
  PIPIT_ASSIGN_OR_RETURN(std::unique_ptr<VideoDecoder> d, module().open(path, nullptr, path));
  return std::unique_ptr<VideoFile>(new VideoFile(std::move(d)));
}

Result<std::unique_ptr<VideoFile>> VideoFile::open_bytes(std::vector<uint8_t> bytes, const std::string& what) {
  if (bytes.empty()) return Error::invalid_argument("[video] {}: empty", what);
  if (!module().open) return no_decoder(what);
  PIPIT_ASSIGN_OR_RETURN(std::unique_ptr<VideoDecoder> d, module().open("", &bytes, what));
  return std::unique_ptr<VideoFile>(new VideoFile(std::move(d)));
}

Result<Image> VideoFile::frame(int32_t index) { return dec_->frame(index); }

Result<std::unique_ptr<VideoFile>> open_video(const std::string& source) {
  if (!is_video_data_url(source)) return VideoFile::open(source);
  const size_t comma = source.find(',');
  if (comma == std::string::npos || source.compare(comma - 7, 7, ";base64") != 0)
    return Error::invalid_argument("[video] a data URL must be data:video/...;base64,...");
  PIPIT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, decode_base64(std::string_view(source).substr(comma + 1)));
  return VideoFile::open_bytes(std::move(bytes), "data URL");
}

}  // namespace pipit
