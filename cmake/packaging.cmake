# `cpack -G DEB` in a build folder: a .deb of exactly what `cmake --install` places (the CLI, libpipit.so/.a, the C
# header, pkg-config and CMake files, the video module, the Python package when built). The package installs under
# the prefix the build was configured with, because the video module's folder is compiled in: configure with
# -DCMAKE_INSTALL_PREFIX=/usr for a system package (README.md "Install"). dpkg-shlibdeps (dpkg-dev) fills Depends
# from the libraries the files link.
set(CPACK_PACKAGE_NAME pipit)
set(CPACK_PACKAGE_VENDOR "The pipit authors")
set(CPACK_PACKAGE_CONTACT "The pipit authors")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "LLM and VLM inference on the CPU: CLI, C library, OpenAI-compatible server")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # pipit_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "ocl-icd-libopencl1")  # only `--device opencl` loads it (backends/opencl/cl_api.h)
include(CPack)
