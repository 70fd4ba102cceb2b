// The TokenRequest API (authentication.k8s.io/v1, POST
// /api/v1/namespaces/NS/serviceaccounts/NAME/token): a token of a service account for a lifetime
// of its own, bound to no pod. `shmipamctl kubeconfig` asks one for the DaemonSet's service
// account, so that the node's kubeconfig outlives the pod that wrote it (a projected token dies
// with its pod: a rolling update, an image that does not pull, an uninstall), as Calico's node
// agent does for its CNI kubeconfig.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "kube/api_client.h"

namespace shmipam::kube {

// The API server refuses a shorter spec.expirationSeconds.
inline constexpr int64_t kShortestTokenSeconds = 600;

struct IssuedToken {
    std::string token;
    int64_t expires_at = 0;  // status.expirationTimestamp, Unix seconds
};

// Asks the API server for a token of service account `ns`/`name` valid `seconds`. Errors as
// ApiClient's (api_client.h): 7 when the server refuses (401, 403: the role lacks create on
// serviceaccounts/token; 404: no such account, or no TokenRequest API; 4xx: an invalid
// request), 11 when it cannot answer now, 999 for an answer no API server gives.
Expected<IssuedToken> request_token(ApiClient& client, const std::string& ns,
                                    const std::string& name, int64_t seconds);

// "2026-11-28T18:00:00Z" (RFC 3339, UTC or with an offset, fractions ignored) in Unix seconds;
// nullopt for anything else.
std::optional<int64_t> parse_rfc3339(const std::string& text);

}  // namespace shmipam::kube
