// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#pragma once

// The library builds with -fvisibility=hidden; only what is marked here is exported.
#define KVTIER_EXPORT [[gnu::visibility("default")]]
