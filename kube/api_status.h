// The API server's `Status` object: the body of every error it answers (401, 403, 404, 409,
// 5xx...), which says why in words the operator knows from kubectl.
//   {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404, "reason": "NotFound",
//    "message": "pods \"web-0\" not found", "details": {"name": "web-0", "kind": "pods"}}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace shmipam::kube {

struct ApiStatus {
    std::string status;   // "Failure"
    std::string reason;   // "NotFound", "Forbidden", "Unauthorized", "ServiceUnavailable", ...
    std::string message;  // as kubectl prints it
    int64_t code = 0;
    std::string details_name, details_group, details_kind;  // details: the object it is about
};

// The Status in `body`, or nullopt when the body is not one (not JSON, or its kind is not
// "Status": a proxy's page, a load balancer's). Fields of the wrong type are left empty. Never
// throws.
std::optional<ApiStatus> decode_status(std::string_view body);

// "reason: message" (or what of them there is), or the start of the body when it is no Status:
// what an error message quotes of an answer.
std::string describe_answer(long http_status, std::string_view body);

}  // namespace shmipam::kube
