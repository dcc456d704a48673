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
target_link_libraries(gnnsparse_sycl PUBLIC "${SYCL_LIBRARY}" ${CMAKE_DL_LIBS})

python_add_library(_sycl MODULE ${PROJECT_SOURCE_DIR}/python/bindings/sycl_module.cpp WITH_SOABI)
target_include_directories(_sycl SYSTEM PRIVATE "${DPCTL_INCLUDE_DIR}")
target_include_directories(_sycl PRIVATE ${PROJECT_SOURCE_DIR}/python/bindings)
target_link_libraries(_sycl PRIVATE gnnsparse_sycl pybind11::headers)
# installed as <prefix>/lib/python3.X/site-packages/gnnsparse/_sycl*.so; libsycl.so lives in <prefix>/lib
set_target_properties(_sycl PROPERTIES INSTALL_RPATH "$ORIGIN/../../..;${SYCL_PREFIX}/lib" BUILD_WITH_INSTALL_RPATH ON)
install(TARGETS _sycl DESTINATION gnnsparse)

# Build-time SPIR-V of every kernel instance the dispatchers can pick (cmake/aot/gnnsparse_aot.cpp),
# installed as gnnsparse/kernels/*.gnnspv beside the module: a new process loads them without the
# C++ front end. GNNSPARSE_SYCL_SPIRV: AUTO (ship what the compiler can build here; without an
# OpenCL device the packs are empty and kernels compile from source at run time), ON (fail the
# build instead), OFF (ship none).
set(GNNSPARSE_SYCL_SPIRV "AUTO" CACHE STRING "Compile the SYCL kernels to SPIR-V at build time: AUTO, ON, OFF")
if(NOT GNNSPARSE_SYCL_SPIRV STREQUAL "OFF")
  add_executable(gnnsparse_aot ${PROJECT_SOURCE_DIR}/cmake/aot/gnnsparse_aot.cpp)
  target_link_libraries(gnnsparse_aot PRIVATE gnnsparse_sycl ${CMAKE_DL_LIBS})
  set_target_properties(gnnsparse_aot PROPERTIES BUILD_RPATH "${SYCL_PREFIX}/lib")
  set(_gs_env "")
  if(EXISTS "${SYCL_PREFIX}/lib/libintelocl.so")  # the OpenCL CPU device drives the compiler
    set(_gs_env OCL_ICD_FILENAMES=${SYCL_PREFIX}/lib/libintelocl.so)
  endif()
  set(_gs_strict "")
  if(GNNSPARSE_SYCL_SPIRV STREQUAL "ON")
    set(_gs_strict --strict)
  endif()
  file(GLOB_RECURSE _gs_kernel_headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/sycl/kernels/*.hpp)
  set(_gs_kdir ${CMAKE_CURRENT_BINARY_DIR}/kernels)
  file(MAKE_DIRECTORY ${_gs_kdir})
  # GNNSPARSE_SYCL_PVC=ON: the Intel GPU kernels too -- SPIR-V of every ESIMD instance (about 1 min
  # of CPU: the ESIMD lowering is slow; 22 MB) and ocloc -device pvc binaries of every instance
  # (cmake/aot/pvc_binaries.sh; about 0.4 s of CPU per instance), installed as
  # gnnsparse/kernels/pvc.gnnbin and loaded on Level Zero pvc devices. Off by default: only Intel
  # GPUs use them, and without them those compile ESIMD kernels at run time (and cache them).
  option(GNNSPARSE_SYCL_PVC "Ship ESIMD SPIR-V and ocloc-built pvc binaries (needs ocloc)" OFF)
  set(_gs_groups "spmm|spmm.hpp,spmm_heads.hpp,tiles.hpp,panel.hpp" "fused_sddmm|fusedmm.hpp,sddmm.hpp,gatv2.hpp")  # packs built in parallel
  # the quantized kernels (sycl/quant_policy.hpp lists their instances), a pack of their own
  list(APPEND _gs_groups "quant|quant.hpp,quant_spmm.hpp,quant_sddmm.hpp,qgemm.hpp")
  if(GNNSPARSE_SYCL_PVC)
    list(APPEND _gs_groups "esimd|esimd/sddmm.hpp,esimd/spmm.hpp,esimd/fusedmm.hpp,esimd/tiles.hpp,esimd/panel.hpp")
    list(APPEND _gs_groups "esimd_quant|esimd/quantize.hpp,esimd/qspmm.hpp")  # the ESIMD quantized kernels (17 instances)
  endif()
  set(_gs_packs "")
  foreach(_group IN LISTS _gs_groups)
    string(REPLACE "|" ";" _group "${_group}")
    string(REPLACE "," ";" _group "${_group}")
    list(POP_FRONT _group _name)
    add_custom_command(
      OUTPUT ${_gs_kdir}/${_name}.gnnspv
      COMMAND ${CMAKE_COMMAND} -E env ${_gs_env} $<TARGET_FILE:gnnsparse_aot> ${_gs_strict} ${_gs_kdir}/${_name}.gnnspv
              ${_group}
      # what the packs hold depends on the kernel sources and the instance lists, not on the rest
      # of the host runtime (the tool is built first through gnnsparse_spirv's dependency)
      DEPENDS ${_gs_kernel_headers} ${PROJECT_SOURCE_DIR}/include/gnnsparse/ops.hpp ${PROJECT_SOURCE_DIR}/sycl/instances.hpp
              ${PROJECT_SOURCE_DIR}/sycl/policy.hpp ${PROJECT_SOURCE_DIR}/sycl/esimd_policy.hpp
              ${PROJECT_SOURCE_DIR}/sycl/quant_policy.hpp
              ${PROJECT_SOURCE_DIR}/cmake/aot/gnnsparse_aot.cpp
      COMMENT "gnnsparse: SPIR-V of every instance of ${_group}"
      VERBATIM)
    list(APPEND _gs_packs ${_gs_kdir}/${_name}.gnnspv)
  endforeach()
  add_custom_target(gnnsparse_spirv ALL DEPENDS ${_gs_packs})
  add_dependencies(gnnsparse_spirv gnnsparse_aot)
  install(FILES ${_gs_packs} DESTINATION gnnsparse/kernels)

  if(GNNSPARSE_SYCL_PVC)
    find_program(GNNSPARSE_OCLOC ocloc REQUIRED)
    add_custom_command(
      OUTPUT ${_gs_kdir}/pvc.gnnbin
      COMMAND bash ${PROJECT_SOURCE_DIR}/cmake/aot/pvc_binaries.sh -j 2 --allow-failures ${_gs_kdir}/pvc.gnnbin
              ${_gs_packs}
      DEPENDS ${_gs_packs} ${PROJECT_SOURCE_DIR}/cmake/aot/pvc_binaries.sh ${PROJECT_SOURCE_DIR}/cmake/aot/pack.py
      COMMENT "gnnsparse: ocloc -device pvc binaries of every shipped instance"
      VERBATIM)
    add_custom_target(gnnsparse_pvc ALL DEPENDS ${_gs_kdir}/pvc.gnnbin)
    install(FILES ${_gs_kdir}/pvc.gnnbin DESTINATION gnnsparse/kernels)
  endif()
endif()

if(GNNSPARSE_BENCH AND EXISTS ${PROJECT_SOURCE_DIR}/bench/bench_sycl.cpp)
  add_executable(bench_sycl ${PROJECT_SOURCE_DIR}/bench/bench_sycl.cpp)
  target_link_libraries(bench_sycl PRIVATE gnnsparse_sycl)
  set_target_properties(bench_sycl PROPERTIES INSTALL_RPATH "$ORIGIN/../../../..;${SYCL_PREFIX}/lib" BUILD_WITH_INSTALL_RPATH ON)
  install(TARGETS bench_sycl DESTINATION gnnsparse/bin)
endif()

if(GNNSPARSE_SYCL_AOT AND EXISTS ${CMAKE_CURRENT_LIST_DIR}/SyclAot.cmake)
  include(${CMAKE_CURRENT_LIST_DIR}/SyclAot.cmake)
endif()
