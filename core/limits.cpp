// Available memory from /proc/meminfo and the process's rlimits.
#include "core/limits.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace pipit {

namespace {

// "MemAvailable:   23481056 kB" -> bytes; 0 when the line is missing (kernels before 3.14, no /proc).
uint64_t meminfo_available() {
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kb = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "MemAvailable:", 13) == 0) {
      kb = std::strtoull(line + 13, nullptr, 10);
      break;
    }
  std::fclose(f);
  return kb * 1024;
}

// Bytes of address space mapped now (VmSize), for the distance to RLIMIT_AS.
uint64_t mapped_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long pages = 0;
  if (std::fscanf(f, "%llu", &pages) != 1) pages = 0;
  std::fclose(f);
  return uint64_t(pages) * uint64_t(sysconf(_SC_PAGESIZE));
}

}  // namespace

uint64_t available_memory() {
  if (const char* e = std::getenv("PIPIT_MEM_AVAILABLE")) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(e, &end, 10);
    if (end != e && *end == 0) return uint64_t(v);
  }
  uint64_t avail = meminfo_available();
  if (avail == 0) {
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    avail = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : UINT64_MAX;
  }
  for (int res : {RLIMIT_AS, RLIMIT_DATA}) {
    struct rlimit rl{};
    if (getrlimit(res, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
      const uint64_t used = mapped_bytes(), lim = uint64_t(rl.rlim_cur);
      avail = std::min(avail, lim > used ? lim - used : 0);
    }
  }
  return avail;
}

std::string format_bytes(uint64_t b) {
  char buf[64];
  if (b >= 1000ull * 1000 * 1000 * 1000) std::snprintf(buf, sizeof buf, "%.1f TB", double(b) / 1e12);
  else if (b >= 1000ull * 1000 * 1000) std::snprintf(buf, sizeof buf, "%.1f GB", double(b) / 1e9);
  else if (b >= 1000ull * 1000) std::snprintf(buf, sizeof buf, "%.1f MB", double(b) / 1e6);
  else if (b >= 1000) std::snprintf(buf, sizeof buf, "%.1f KB", double(b) / 1e3);
  else std::snprintf(buf, sizeof buf, "%llu bytes", (unsigned long long)b);
  return buf;
}

}  // namespace pipit
