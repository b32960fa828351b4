#include <ckpt/result.hpp>

#include <cstring>

namespace ckpt {

Error sys_error(const std::string& what, int code) {
  return Error{code, what + ": " + std::strerror(code)};
}

Error make_error(int code, std::string message) {
  return Error{code, std::move(message)};
}

}  // namespace ckpt
