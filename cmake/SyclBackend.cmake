# SYCL backend: host code compiled by the ordinary C++ compiler against the SYCL runtime that the
# intel-sycl-rt wheel installs into the Python environment's prefix (include/sycl, lib/libsycl.so);
# device code is embedded as text and compiled at run time by the kernel_compiler extension.
if(GNNSPARSE_SYCL STREQUAL "OFF")
  message(STATUS "gnnsparse: SYCL backend off")
  return()
endif()
execute_process(
  COMMAND "${Python_EXECUTABLE}" -c
          "import dpctl, pathlib; print(dpctl.get_include()); print(pathlib.Path(dpctl.__file__).resolve().parents[4])"
  OUTPUT_VARIABLE _gs_dpctl_out OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _gs_dpctl_rc ERROR_QUIET)
if(NOT _gs_dpctl_rc EQUAL 0)
  if(GNNSPARSE_SYCL STREQUAL "ON")
    message(FATAL_ERROR "GNNSPARSE_SYCL=ON but dpctl is not importable by ${Python_EXECUTABLE}")
  endif()
  message(STATUS "gnnsparse: dpctl not importable, SYCL backend skipped")
  return()
endif()
string(REPLACE "\n" ";" _gs_dpctl_out "${_gs_dpctl_out}")
list(GET _gs_dpctl_out 0 DPCTL_INCLUDE_DIR)
list(GET _gs_dpctl_out 1 SYCL_PREFIX)
find_library(SYCL_LIBRARY NAMES sycl PATHS "${SYCL_PREFIX}/lib" NO_DEFAULT_PATH)
find_path(SYCL_INCLUDE_DIR sycl/sycl.hpp PATHS "${SYCL_PREFIX}/include" NO_DEFAULT_PATH)
if(NOT SYCL_LIBRARY OR NOT SYCL_INCLUDE_DIR)
  if(GNNSPARSE_SYCL STREQUAL "ON")
    message(FATAL_ERROR "GNNSPARSE_SYCL=ON but libsycl/headers were not found under ${SYCL_PREFIX}")
  endif()
  message(STATUS "gnnsparse: SYCL runtime not found under ${SYCL_PREFIX}, SYCL backend skipped")
  return()
endif()
message(STATUS "gnnsparse: SYCL backend on (libsycl ${SYCL_LIBRARY}, dpctl include ${DPCTL_INCLUDE_DIR})")

include(${CMAKE_CURRENT_LIST_DIR}/EmbedKernels.cmake)
gnnsparse_embed_kernels(${CMAKE_CURRENT_BINARY_DIR}/kernel_sources.cpp DIR ${PROJECT_SOURCE_DIR}/sycl/kernels
                        FILE gnnsparse/ops.hpp ${PROJECT_SOURCE_DIR}/include/gnnsparse/ops.hpp)

file(GLOB GNNSPARSE_SYCL_HOST_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/sycl/*.cpp)
add_library(gnnsparse_sycl STATIC ${GNNSPARSE_SYCL_HOST_SOURCES} ${CMAKE_CURRENT_BINARY_DIR}/kernel_sources.cpp)
target_include_directories(gnnsparse_sycl PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/sycl)
# -isystem: the SYCL headers are not ours to warn about
target_include_directories(gnnsparse_sycl SYSTEM PUBLIC "${SYCL_INCLUDE_DIR}")
target_compile_definitions(gnnsparse_sycl PUBLIC SYCL_DISABLE_FSYCL_SYCLHPP_WARNING)
target_link_libraries(gnnsparse_sycl PUBLIC "${SYCL_LIBRARY}")

python_add_library(_sycl MODULE ${PROJECT_SOURCE_DIR}/python/bindings/sycl_module.cpp WITH_SOABI)
target_include_directories(_sycl SYSTEM PRIVATE "${DPCTL_INCLUDE_DIR}")
target_include_directories(_sycl PRIVATE ${PROJECT_SOURCE_DIR}/python/bindings)
target_link_libraries(_sycl PRIVATE gnnsparse_sycl pybind11::headers)
# installed as <prefix>/lib/python3.X/site-packages/gnnsparse/_sycl*.so; libsycl.so lives in <prefix>/lib
set_target_properties(_sycl PROPERTIES INSTALL_RPATH "$ORIGIN/../../..;${SYCL_PREFIX}/lib" BUILD_WITH_INSTALL_RPATH ON)
install(TARGETS _sycl DESTINATION gnnsparse)

if(GNNSPARSE_BENCH AND EXISTS ${PROJECT_SOURCE_DIR}/bench/bench_sycl.cpp)
  add_executable(bench_sycl ${PROJECT_SOURCE_DIR}/bench/bench_sycl.cpp)
  target_link_libraries(bench_sycl PRIVATE gnnsparse_sycl)
  set_target_properties(bench_sycl PROPERTIES INSTALL_RPATH "$ORIGIN/../../../..;${SYCL_PREFIX}/lib" BUILD_WITH_INSTALL_RPATH ON)
  install(TARGETS bench_sycl DESTINATION gnnsparse/bin)
endif()

if(GNNSPARSE_SYCL_AOT AND EXISTS ${CMAKE_CURRENT_LIST_DIR}/SyclAot.cmake)
  include(${CMAKE_CURRENT_LIST_DIR}/SyclAot.cmake)
endif()
