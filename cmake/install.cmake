# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# `cmake --install <build> --component dev`: the shared library, the public headers and the CMake
# package (kvtierConfig.cmake, its version file, the exported target kvtier::kvtier).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS kvtier_shared EXPORT kvtierTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev NAMELINK_COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/kvtier DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT dev FILES_MATCHING PATTERN "*.hpp")
install(FILES ${CMAKE_BINARY_DIR}/include/kvtier/build_config.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvtier COMPONENT dev)
set(kvtier_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/kvtier)
install(EXPORT kvtierTargets NAMESPACE kvtier:: DESTINATION ${kvtier_cmake_dir} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kvtierConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/kvtierConfig.cmake INSTALL_DESTINATION ${kvtier_cmake_dir})
# 0.x: any other minor version may break the API.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/kvtierConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/kvtierConfig.cmake ${CMAKE_BINARY_DIR}/kvtierConfigVersion.cmake
        DESTINATION ${kvtier_cmake_dir} COMPONENT dev)
