// The token `shmipamctl kubeconfig` writes into the node's kubeconfig (kubeconfig.cpp), and
// what it remembers of it in the file itself, on one comment line:
//   # shmipam-token: source=requested expires=1767312000 next=1767247200
//   # shmipam-token: source=projected next=1767226200
// requested: a token of the DaemonSet's service account from TokenRequest (kube/token_request.h),
// bound to no pod, valid until `expires`; asked again from `next` on (about a quarter of its
// life, with jitter, so that a thousand nodes started together do not ask together).
// projected: the pod's own projected token, because TokenRequest was refused; TokenRequest is
// tried again from `next` on.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "base/status.h"

namespace shmipam::tools {

struct TokenState {
    enum class Source { kNone, kRequested, kProjected };
    Source source = Source::kNone;
    int64_t expires = 0;  // requested: Unix seconds
    int64_t next = 0;     // when to ask TokenRequest again
};

// The comment line for `s` (ending in '\n'; "" for kNone).
std::string token_state_line(const TokenState& s);
// What a kubeconfig this verb wrote says of its token; kNone when it says nothing.
TokenState read_token_state(const std::string& kubeconfig_text);

// When to ask again for a token valid until `expires`: about a quarter of its remaining life
// from `now`, moved by up to a tenth of that either way.
int64_t renew_time(int64_t now, int64_t expires);

// The service account a projected token is of, from its JWT "sub" claim
// ("system:serviceaccount:NS:NAME"): {namespace, name}. Not verified: the API server does that
// when the token is used.
Expected<std::pair<std::string, std::string>> service_account_of(const std::string& jwt);

}  // namespace shmipam::tools
