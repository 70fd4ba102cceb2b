// A non-owning reference to a callable (as C++26's std::function_ref): passing a lambda to a
// virtual function without std::function's heap allocation, on the claim path where a scan
// offers candidates to the policy's visitor. The callable must outlive the reference, which
// holds for a parameter used within the call.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace shmipam::base {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
  public:
    template <typename F, typename = std::enable_if_t<
                              !std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
                              std::is_invocable_r_v<R, F&, Args...>>>
    FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): used like std::function
        : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
          call_([](void* o, Args... args) -> R {
              return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(args)...);
          }) {}

    R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

  private:
    void* object_;
    R (*call_)(void*, Args...);
};

}  // namespace shmipam::base
