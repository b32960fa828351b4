// Result<T>: a value or an Error carrying an errno-style code and a one-line,
// human-readable cause. Library code never exits or throws across its API:
// a library that stops other processes must unwind and let them go.
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

namespace ckpt {

struct Error {
  int code = EINVAL;  // positive errno value
  std::string message;

  // Prefixes context ("reading maps: " + cause), keeping the code.
  Error context(const std::string& what) const { return Error{code, what + ": " + message}; }
};

// Builds an Error from errno (or the given code) with strerror appended.
Error sys_error(const std::string& what, int code = errno);
Error make_error(int code, std::string message);

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error e) : v_(std::move(e)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& value() const& { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return std::get<0>(v_); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error e) : err_(std::move(e)), ok_(false) {}
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }

 private:
  Error err_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace ckpt

// Propagates an error from a Result-returning expression.
#define CKPT_TRY(expr)                         \
  do {                                         \
    auto _ckpt_r = (expr);                     \
    if (!_ckpt_r.ok()) return _ckpt_r.error(); \
  } while (0)

#define CKPT_CONCAT_INNER(a, b) a##b
#define CKPT_CONCAT(a, b) CKPT_CONCAT_INNER(a, b)
// Declares `lhs` from a Result's value or returns its error.
#define CKPT_ASSIGN(lhs, expr) CKPT_ASSIGN_IMPL(CKPT_CONCAT(_ckpt_r_, __LINE__), lhs, expr)
#define CKPT_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                     \
  if (!tmp.ok()) return tmp.error();     \
  lhs = std::move(tmp).value()
