// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// libkvtier.so is the layers' static libraries linked whole (src/CMakeLists.txt); CMake wants a
// target to have a source of its own, so it gets this one.
#include "kvtier/kvtier.hpp"
