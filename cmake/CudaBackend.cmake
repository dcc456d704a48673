# CUDA backend: built whenever nvcc is found (GNNSPARSE_CUDA=AUTO), for CMAKE_CUDA_ARCHITECTURES
# (default 80;90, set through pyproject.toml / GNNSPARSE_CUDA_ARCHS).
if(GNNSPARSE_CUDA STREQUAL "OFF")
  message(STATUS "gnnsparse: CUDA backend off")
  return()
endif()
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  if(GNNSPARSE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "GNNSPARSE_CUDA=ON but no CUDA compiler was found")
  endif()
  message(STATUS "gnnsparse: no nvcc found, CUDA backend skipped")
  return()
endif()
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  set(CMAKE_CUDA_ARCHITECTURES 80 90)
endif()
enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
find_package(CUDAToolkit REQUIRED)
message(STATUS "gnnsparse: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES})")

file(GLOB GNNSPARSE_CUDA_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/cuda/*.cu)
add_library(gnnsparse_cuda STATIC ${GNNSPARSE_CUDA_SOURCES})
target_include_directories(gnnsparse_cuda PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/cuda)
target_compile_options(gnnsparse_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
# GNNSPARSE_PTXAS_VERBOSE=ON prints registers / spills of every kernel.
option(GNNSPARSE_PTXAS_VERBOSE "Pass -Xptxas -v to nvcc" OFF)
if(GNNSPARSE_PTXAS_VERBOSE)
  target_compile_options(gnnsparse_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-v>)
endif()
set_target_properties(gnnsparse_cuda PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
target_link_libraries(gnnsparse_cuda PUBLIC CUDA::cudart_static)

# gnnsparse._cuda, beside gnnsparse._core (which it takes the CsrView type from).
python_add_library(_cuda MODULE ${PROJECT_SOURCE_DIR}/python/bindings/cuda_module.cpp WITH_SOABI)
target_include_directories(_cuda PRIVATE ${PROJECT_SOURCE_DIR}/python/bindings)
target_link_libraries(_cuda PRIVATE gnnsparse_cuda pybind11::headers)
install(TARGETS _cuda DESTINATION gnnsparse)

# cuda_host_test: dispatch tables, argument checks and hub-pass sizing; runs without a GPU.
option(GNNSPARSE_CUDA_HOST_TEST "Build cuda_host_test (host-only checks of the CUDA backend)" OFF)
if(GNNSPARSE_CUDA_HOST_TEST)
  add_executable(cuda_host_test ${PROJECT_SOURCE_DIR}/cuda/test/host_test.cpp)
  target_link_libraries(cuda_host_test PRIVATE gnnsparse_cuda)
endif()

if(GNNSPARSE_BENCH)
  add_executable(bench_cuda ${PROJECT_SOURCE_DIR}/bench/bench_cuda.cu)
  # cuSPARSE (every SpMM / SDDMM reference) and cuBLAS (the grid's dense SGEMM rows)
  if(TARGET CUDA::cusparse AND TARGET CUDA::cublas)
    target_link_libraries(bench_cuda PRIVATE gnnsparse_cuda CUDA::cusparse CUDA::cublas)
  else()
    # A toolkit without them (a compiler-only install): the copies of the nvidia-cusparse and
    # nvidia-cublas wheels, unpacked at $GNNSPARSE_CUSPARSE_ROOT (their nvidia/cu13 folder:
    # include/, lib/).
    find_path(GNNSPARSE_CUSPARSE_INCLUDE cusparse.h HINTS $ENV{GNNSPARSE_CUSPARSE_ROOT}/include REQUIRED)
    find_library(GNNSPARSE_CUSPARSE_LIB NAMES cusparse libcusparse.so.12
                 HINTS $ENV{GNNSPARSE_CUSPARSE_ROOT}/lib REQUIRED)
    find_library(GNNSPARSE_CUBLAS_LIB NAMES cublas libcublas.so.13 libcublas.so.12
                 HINTS $ENV{GNNSPARSE_CUSPARSE_ROOT}/lib REQUIRED)
    target_include_directories(bench_cuda PRIVATE ${GNNSPARSE_CUSPARSE_INCLUDE})
    target_link_libraries(bench_cuda PRIVATE gnnsparse_cuda ${GNNSPARSE_CUSPARSE_LIB} ${GNNSPARSE_CUBLAS_LIB})
    # their own dependencies (nvJitLink, cublasLt) are resolved where it runs
    target_link_options(bench_cuda PRIVATE -Wl,--allow-shlib-undefined)
  endif()
  install(TARGETS bench_cuda DESTINATION gnnsparse/bin)
endif()
