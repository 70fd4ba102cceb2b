// GETs (and TokenRequest's POST) of the Kubernetes API over HTTPS (libcurl), as a kubeconfig allows
// them (docs/kubernetes.md, "Errors"). Linked into the helper shmipam-kube only, never into the
// plugin (kube/pod_protocol.h says why).
//
// One client serves one helper run: its budget, the whole run's, starts when it is made, and
// its requests share one connection. A connection (TCP and TLS handshakes) that is not made
// within the connect timeout gives up at once, so that a black-holed address costs that, not
// the budget. A request is sent a second time, within the budget, when the connection was
// refused or reset (an API server restarting, a load balancer moving) and when the server
// answered 429 or 5xx with a Retry-After that the budget can wait for; never more. Every error
// names the URL and what failed:
//   7  the API server refused the kubeconfig's credentials (401) or the verb (403), naming the
//      kubeconfig, the verb and the resource; the server's certificate did not verify, or the
//      client's certificate or key is unusable (TLS, naming libcurl's reason);
//   11 the server is unreachable, no connection was made within the connect timeout, it did
//      not answer within the budget, answered 5xx or 429, or answered what is not JSON (a
//      proxy's page): try again later;
//   999 an answer no API server gives (another status, a body too large).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/status.h"
#include "kube/kubeconfig.h"

namespace shmipam::kube {

// One object of the API: where it is and how messages name it.
struct Resource {
    std::string group;    // "" for the core group (under /api), "apps" (under /apis/apps)
    std::string version;  // "v1"
    std::string plural;   // "pods", "statefulsets"
    std::string namespace_, name;

    std::string path() const;  // "/api/v1/namespaces/NS/pods/NAME"
    std::string what() const;  // "pods" / "statefulsets.apps": the resource as RBAC names it
};
Resource pod_resource(const std::string& ns, const std::string& name);
Resource statefulset_resource(const std::string& ns, const std::string& name);
Resource virtualmachine_resource(const std::string& ns, const std::string& name);  // KubeVirt's

struct Response {
    long status = 0;  // the HTTP status
    std::string body;
    // The answer's Retry-After in seconds, when it had one (a 429 or 5xx that still stands
    // after the retry the budget allowed, or one whose wait the budget could not afford).
    std::optional<uint64_t> retry_after_s;
    int attempts = 1;  // 2: the request was sent again (a refusal, a reset, a Retry-After)
};

class ApiClient {
  public:
    // The budget (the whole run's, connections included) starts now; each connection made
    // within it has at most `connect_timeout` (less when less of the budget is left).
    ApiClient(Kubeconfig cfg, std::chrono::milliseconds budget,
              std::chrono::milliseconds connect_timeout);
    ~ApiClient();
    ApiClient(const ApiClient&) = delete;
    ApiClient& operator=(const ApiClient&) = delete;

    // GET the server's `path`: the status and body of whatever answered (any status), or code 11
    // (unreachable, timed out, the budget spent) or 7 (TLS) naming the URL and why.
    Expected<Response> get(const std::string& path);
    // POST `body` (JSON) to `path`: the same answers as get().
    Expected<Response> post(const std::string& path, const std::string& body);

    // GET `r`: the object, or nullopt when the API server says it is not there (404 with a
    // NotFound Status naming it); otherwise the errors of the header comment.
    Expected<std::optional<nlohmann::json>> get_object(const Resource& r);

    const Kubeconfig& config() const { return cfg_; }
    std::string url(const std::string& path) const { return cfg_.server + path; }

  private:
    struct Attempt;
    Expected<Response> send(const char* method, const std::string& path, const std::string* body);
    Attempt send_once(const char* method, const std::string& path, const std::string* body);
    struct Impl;
    Kubeconfig cfg_;
    // The URL requests go to when it is not cfg_.server (tls-server-name); messages name
    // cfg_.server's.
    std::string request_base_;
    std::chrono::milliseconds budget_;
    std::chrono::milliseconds connect_timeout_;
    std::chrono::steady_clock::time_point deadline_;
    std::unique_ptr<Impl> impl_;
};

}  // namespace shmipam::kube
