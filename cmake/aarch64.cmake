# Cross-compile for aarch64 with Debian's g++-aarch64-linux-gnu; tests run under qemu-aarch64 -cpu max
# (which emulates NEON, dotprod, fp16 and i8mm, so every Arm kernel is exercised).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# LD_LIBRARY_PATH: the guest loader comes from the cross toolchain; without it, it would take libc.so.6 from the host's
# ld.so.cache, which lists Debian's multiarch libc6:arm64 (installed with the arm64 tokenizer libraries) — a
# different glibc build than the loader's, and the first pthread_create then spins forever.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-cpu;max;-L;/usr/aarch64-linux-gnu;-E;LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib)
# pkg-config: Debian's arm64 multiarch .pc files (PCRE2, utf8proc from scripts/setup.sh), not the host's
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
