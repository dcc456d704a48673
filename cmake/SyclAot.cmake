# GNNSPARSE_SYCL_AOT=ON: ahead-of-time ESIMD kernels for the Intel Data Center GPU Max 1550 (pvc),
# for users with Intel oneAPI (icpx). Not built in this project's CI (no icpx, no Intel GPU):
# there the same kernels are checked through the run-time compiler, ocloc and the host shim
# (docs/esimd.md).
#
# It compiles the SAME kernel headers the run-time kernel_compiler reads (sycl/kernels/esimd/*.hpp)
# with
#   icpx -fsycl -fsycl-targets=spir64_gen -Xs "-device pvc" -shared -fPIC -O3
# into libgnnsparse_esimd_pvc.so (every instance of sycl/esimd_policy.hpp, see
# cmake/aot/icpx_esimd_image.cpp),
# installed next to the _sycl module. It exports
#   extern "C" bool gnnsparse_esimd_aot_kernel(const char *name, const sycl::context &,
#                                               const sycl::device &, sycl::kernel *out);
# which the runtime can dlopen and try before the kernel_compiler (same registered names).
# The image is tied to the SYCL runtime (libsycl) of the oneAPI release that built it: install the
# matching intel-sycl-rt in the Python environment.
#
# Options:
#   GNNSPARSE_ICPX            path of icpx (default: found on PATH)
#   GNNSPARSE_AOT_DEVICE      ocloc device list for -Xs "-device ..." (default: pvc)
#   GNNSPARSE_AOT_EXTRA_FLAGS extra icpx flags (a list)
#
#   pip install . -Ccmake.define.GNNSPARSE_SYCL_AOT=ON        (with icpx on PATH, oneAPI setvars.sh)
find_program(GNNSPARSE_ICPX icpx DOC "Intel oneAPI DPC++/C++ compiler for the ahead-of-time ESIMD image")
if(NOT GNNSPARSE_ICPX)
  message(FATAL_ERROR "GNNSPARSE_SYCL_AOT=ON needs icpx (Intel oneAPI DPC++/C++); source oneAPI's setvars.sh "
                      "or set GNNSPARSE_ICPX")
endif()
set(GNNSPARSE_AOT_DEVICE "pvc" CACHE STRING "ocloc device(s) for the ahead-of-time ESIMD image")
set(GNNSPARSE_AOT_EXTRA_FLAGS "" CACHE STRING "extra icpx flags for the ahead-of-time ESIMD image")

file(GLOB _gs_esimd_headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/sycl/kernels/esimd/*.hpp
     ${PROJECT_SOURCE_DIR}/sycl/esimd_policy.hpp ${PROJECT_SOURCE_DIR}/sycl/instances.hpp)
set(_gs_aot_src ${PROJECT_SOURCE_DIR}/cmake/aot/icpx_esimd_image.cpp)
set(_gs_aot_lib ${CMAKE_CURRENT_BINARY_DIR}/libgnnsparse_esimd_pvc.so)
add_custom_command(
  OUTPUT ${_gs_aot_lib}
  COMMAND ${GNNSPARSE_ICPX} -fsycl -fsycl-targets=spir64_gen -Xs "-device ${GNNSPARSE_AOT_DEVICE}"
          -std=c++17 -O3 -shared -fPIC -I${PROJECT_SOURCE_DIR}/sycl/kernels -I${PROJECT_SOURCE_DIR}/sycl
          -I${PROJECT_SOURCE_DIR}/include ${GNNSPARSE_AOT_EXTRA_FLAGS}
          ${_gs_aot_src} -o ${_gs_aot_lib}
  DEPENDS ${_gs_aot_src} ${_gs_esimd_headers}
  COMMENT "icpx: ahead-of-time ESIMD kernels for ${GNNSPARSE_AOT_DEVICE} (every instance of sycl/esimd_policy.hpp)"
  VERBATIM)
add_custom_target(gnnsparse_esimd_aot ALL DEPENDS ${_gs_aot_lib})
install(FILES ${_gs_aot_lib} DESTINATION gnnsparse)
message(STATUS "gnnsparse: ahead-of-time ESIMD image for ${GNNSPARSE_AOT_DEVICE} with ${GNNSPARSE_ICPX}")
