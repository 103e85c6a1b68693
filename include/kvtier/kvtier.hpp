// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Umbrella header of the public API.
#pragma once

#include "kvtier/build_config.hpp"
#include "kvtier/engine.hpp"
#include "kvtier/geometry.hpp"
#include "kvtier/kv_view.hpp"
#include "kvtier/options.hpp"
#include "kvtier/stats.hpp"
#include "kvtier/status.hpp"
