# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Every dependency comes from Debian packages (tools/setup.sh installs them).
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 CONFIG QUIET)
if(NOT CLI11_FOUND)
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${CLI11_INCLUDE_DIR})
endif()
# liburing and xxhash ship no CMake config: find them directly (no pkg-config needed, so a prefix
# given in CMAKE_PREFIX_PATH works too).
function(kvtier_find_c_library target header lib required)
  find_path(${target}_INCLUDE_DIR ${header})
  find_library(${target}_LIBRARY ${lib})
  if(${target}_INCLUDE_DIR AND ${target}_LIBRARY)
    add_library(kvtier::${target} UNKNOWN IMPORTED)
    set_target_properties(kvtier::${target} PROPERTIES IMPORTED_LOCATION ${${target}_LIBRARY}
                          INTERFACE_INCLUDE_DIRECTORIES ${${target}_INCLUDE_DIR})
    set(${target}_FOUND TRUE PARENT_SCOPE)
  elseif(required)
    message(FATAL_ERROR "${header} / lib${lib} not found (tools/setup.sh installs them)")
  endif()
endfunction()
kvtier_find_c_library(xxhash xxhash.h xxhash TRUE)

# Optional dependency helper: AUTO warns when missing, ON fails, OFF skips.
function(kvtier_optional name found)
  if(KVTIER_WITH_${name} STREQUAL "ON" AND NOT ${found})
    message(FATAL_ERROR "KVTIER_WITH_${name}=ON but the dependency was not found")
  elseif(KVTIER_WITH_${name} STREQUAL "AUTO" AND NOT ${found})
    message(WARNING "KVTIER_WITH_${name}=AUTO: dependency not found, building without it")
  endif()
endfunction()

set(KVTIER_HAVE_IO_URING 0)
if(NOT KVTIER_WITH_IO_URING STREQUAL "OFF")
  kvtier_find_c_library(uring liburing.h uring FALSE)
  kvtier_optional(IO_URING uring_FOUND)
  if(uring_FOUND)
    set(KVTIER_HAVE_IO_URING 1)
  endif()
endif()

set(KVTIER_HAVE_CUDA 0)
if(NOT KVTIER_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  kvtier_optional(CUDA CUDAToolkit_FOUND)
  if(CUDAToolkit_FOUND)
    set(KVTIER_HAVE_CUDA 1)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Ampere and Hopper machine code, plus PTX so newer GPUs can JIT it.
      set(CMAKE_CUDA_ARCHITECTURES "80-real;90-real;90-virtual")
    endif()
    if(NOT DEFINED CMAKE_CUDA_COMPILER)
      set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
    endif()
    enable_language(CUDA)
  endif()
endif()

# cuFile: only its header is needed at build time (libcufile.so.0 is loaded at run time). It comes
# with the CUDA toolkit on GDS machines, or from the nvidia-cufile package (PyPI).
set(KVTIER_HAVE_CUFILE 0)
if(KVTIER_HAVE_CUDA AND NOT KVTIER_WITH_CUFILE STREQUAL "OFF")
  execute_process(COMMAND python3 -c "import nvidia, os; print(';'.join(os.path.join(p, 'cu13', 'include') for p in nvidia.__path__))"
                  OUTPUT_VARIABLE KVTIER_PIP_CUFILE_DIRS OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  find_path(CUFILE_INCLUDE_DIR cufile.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${KVTIER_PIP_CUFILE_DIRS})
  if(CUFILE_INCLUDE_DIR)
    set(cufile_FOUND TRUE)
    set(KVTIER_HAVE_CUFILE 1)
  endif()
  kvtier_optional(CUFILE cufile_FOUND)
endif()

# hiredis (RESP) for the Redis Cluster remote tier, through pkg-config (Debian libhiredis-dev).
# Without it the remote tier is built as a stub that reports kNotSupported.
set(KVTIER_HAVE_REDIS 0)
if(NOT KVTIER_WITH_REDIS STREQUAL "OFF")
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(HIREDIS QUIET IMPORTED_TARGET hiredis)
  endif()
  kvtier_optional(REDIS HIREDIS_FOUND)
  if(HIREDIS_FOUND)
    set(KVTIER_HAVE_REDIS 1)
  endif()
endif()
