// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Chained prefix keys live in common/ (the store's record format uses them);
// bench/micro/checksum_bench.cpp includes them by this path.
#pragma once

#include "common/keys.hpp"
