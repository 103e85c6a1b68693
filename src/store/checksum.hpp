// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The record checksum lives in common/ (the store, the devices and the kernels all use it);
// bench/micro/checksum_bench.cpp includes it by this path.
#pragma once

#include "common/checksum.hpp"
