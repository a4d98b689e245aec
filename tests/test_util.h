// Shared helpers for tests: where the test data is, and float comparisons that say where they differ.
#pragma once

#include <cmath>
#include <cstdlib>
#include <string>

#include "core/tensor.h"

namespace pipit::test {

// PIPIT_TESTDATA (env) overrides the CMake setting PIPIT_TESTDATA.
inline std::string testdata() {
  if (const char* e = std::getenv("PIPIT_TESTDATA")) return e;
#ifdef PIPIT_TESTDATA_DIR
  return PIPIT_TESTDATA_DIR;
#else
  return "../shared/testdata";
#endif
}
inline std::string model_dir(const std::string& name) { return testdata() + "/models/" + name; }

struct DiffStats {
  double max_abs = 0;
  int64_t worst = -1;
};
inline DiffStats max_abs_diff(const float* a, const float* b, int64_t n) {
  DiffStats s;
  for (int64_t i = 0; i < n; ++i) {
    double d = std::fabs(double(a[i]) - double(b[i]));
    if (!(d <= s.max_abs)) {  // also catches NaN
      s.max_abs = std::isnan(d) ? INFINITY : d;
      s.worst = i;
    }
  }
  return s;
}

}  // namespace pipit::test
