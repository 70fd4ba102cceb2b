// Errors as values: every layer returns Status / Expected<T>; nothing is thrown across layers.
// Codes are CNI error codes (spec codes below 100, shmipam's own from 100; docs/errors.md).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace shmipam {

enum class Code : int {
    kOk = 0,
    kIncompatibleVersion = 1,
    kUnsupportedField = 2,
    kUnknownContainer = 3,
    kInvalidEnv = 4,
    kIo = 5,
    kDecode = 6,
    kInvalidConfig = 7,
    kTryAgainLater = 11,
    kUnavailable = 50,
    // shmipam's own codes (documented in docs/errors.md)
    kNoAddressFree = 100,
    kRequestedAddressTaken = 101,
    kRequestedAddressInvalid = 102,
    kArenaForeign = 103,
    kArenaVersion = 104,
    kArenaDamaged = 105,
    kIndexFull = 106,
    kAttachmentIncomplete = 107,
    kCheckNoAllocation = 110,
    kCheckMismatch = 111,
    // pool mode (docs/pools.md)
    kPoolAnnotationInvalid = 120,
    kNoPoolAvailable = 121,
    kPoolNotFound = 122,
    // fixed addresses (docs/fixed-ips.md)
    kClaimMoved = 123,
    kInternal = 999,
};

struct Error {
    Code code = Code::kInternal;
    std::string msg;
    std::string details;
};

template <typename T>
class Expected {
  public:
    Expected(T v) : v_(std::move(v)) {}      // NOLINT(google-explicit-constructor)
    Expected(Error e) : v_(std::move(e)) {}  // NOLINT(google-explicit-constructor)
    bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }
    T& value() { return std::get<0>(v_); }
    const T& value() const { return std::get<0>(v_); }
    T& operator*() { return value(); }
    const T& operator*() const { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    const Error& error() const { return std::get<1>(v_); }
    T value_or(T otherwise) const { return ok() ? value() : otherwise; }

  private:
    std::variant<T, Error> v_;
};

// Status: Expected without a value.
struct Ok {};
using Status = Expected<Ok>;

inline Error make_error(Code c, std::string msg, std::string details = {}) {
    return Error{c, std::move(msg), std::move(details)};
}

}  // namespace shmipam
