# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# kvtier_layer(<name> RANK <n> [PUBLIC <layers>...] [PRIVATE <layers>...] SOURCES <files>...)
#
# One layer of src/ (docs/architecture.md) as the static library kvtier_<name>, linking only the
# layers named: PUBLIC those its headers include, PRIVATE those only its sources call. Each must be
# of a lower rank, so the libraries link in layer order and no cycle can form. The ranks are also
# those tools/check_layers.sh checks includes against (it reads them from src/CMakeLists.txt).
# The layers are recorded in order (global property KVTIER_LAYERS): tests/CMakeLists.txt links
# each one alone into an executable, which fails to link on a call into a layer not named here.
# Every layer reaches src/ privately; what links it sees the public headers only (kvtier_internal
# adds src/ for tests and tools).
function(kvtier_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "RANK" "PUBLIC;PRIVATE;SOURCES")
  if(NOT arg_RANK MATCHES "^[0-9]+$")
    message(FATAL_ERROR "layer ${name}: RANK <n> is required")
  endif()
  foreach(dep IN LISTS arg_PUBLIC arg_PRIVATE)
    get_property(dep_rank GLOBAL PROPERTY KVTIER_LAYER_RANK_${dep})
    if(dep_rank STREQUAL "" OR NOT dep_rank LESS arg_RANK)
      message(FATAL_ERROR "layer ${name} (rank ${arg_RANK}) may not use ${dep} (rank '${dep_rank}'): "
                          "only layers of a lower rank, defined before it")
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY KVTIER_LAYER_RANK_${name} ${arg_RANK})
  list(TRANSFORM arg_PUBLIC PREPEND kvtier_)
  list(TRANSFORM arg_PRIVATE PREPEND kvtier_)
  add_library(kvtier_${name} STATIC ${arg_SOURCES})
  target_include_directories(kvtier_${name}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<BUILD_INTERFACE:${CMAKE_BINARY_DIR}/include>
    PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(kvtier_${name} PUBLIC ${arg_PUBLIC} PRIVATE ${arg_PRIVATE})
  set_property(GLOBAL APPEND PROPERTY KVTIER_LAYERS ${name})
endfunction()
