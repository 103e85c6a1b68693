// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Error propagation helpers for Status and Result.
#pragma once

#include <utility>

#include "kvtier/status.hpp"

namespace kvtier::detail {

/// A failed Status on its way out of a function returning either Status or Result<T>.
struct ErrorReturn {
  Status status;
  operator Status() && { return std::move(status); }  // NOLINT(google-explicit-constructor)
  template <typename T>
  operator Result<T>() && {  // NOLINT(google-explicit-constructor)
    return Failure(std::move(status));
  }
};

inline Status status_of(Status s) { return s; }
template <typename T>
Status status_of(const Result<T>& r) {
  return r.has_value() ? Status() : r.error();
}

}  // namespace kvtier::detail

#define KVTIER_CONCAT_INNER(a, b) a##b
#define KVTIER_CONCAT(a, b) KVTIER_CONCAT_INNER(a, b)

/// Returns the error of `expr` (a Status) from the enclosing function, which may return Status
/// or Result<T>.
#define KVTIER_TRY(expr)                                                   \
  do {                                                                     \
    ::kvtier::Status kvtier_try_status_ = (expr);                          \
    if (!kvtier_try_status_.ok()) {                                        \
      return ::kvtier::detail::ErrorReturn{std::move(kvtier_try_status_)}; \
    }                                                                      \
  } while (0)

#define KVTIER_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                                  \
  auto tmp = (expr);                                                                  \
  if (!tmp.has_value()) return ::kvtier::detail::ErrorReturn{std::move(tmp).error()}; \
  lhs = std::move(tmp).value()

/// `KVTIER_ASSIGN_OR_RETURN(auto x, make_x());` declares x or returns make_x()'s error.
#define KVTIER_ASSIGN_OR_RETURN(lhs, expr) \
  KVTIER_ASSIGN_OR_RETURN_IMPL(KVTIER_CONCAT(kvtier_result_, __LINE__), lhs, expr)

/// Precondition check: returns kInvalidArgument; the message is built only on failure.
#define KVTIER_EXPECTS(cond, msg)                                          \
  do {                                                                     \
    if (!(cond)) {                                                         \
      return ::kvtier::detail::ErrorReturn{                                \
          ::kvtier::Status(::kvtier::ErrorCode::kInvalidArgument, (msg))}; \
    }                                                                      \
  } while (0)
