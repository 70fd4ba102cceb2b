// shmipam-kube: the Kubernetes helper (docs/kubernetes.md). No Kubernetes runtime passes a pod's
// labels or owner to a CNI plugin, and the plugin links no HTTPS client (a static libcurl with
// OpenSSL would cost every exec); an ADD that needs them execs this helper with one request on
// stdin (kube/pod_protocol.h: read a pod, read StatefulSets; for shmipamctl kubeconfig, ask
// TokenRequest for a token), which reads the kubeconfig the
// request names (on every run: a rotated token is picked up), GETs the objects from the API
// server within the request's budget, and answers on stdout: the op's answer and exit 0, or an
// error {"code", "msg", "details"} and exit 1, which the plugin passes on.
#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/build_version.h"
#include "base/helper_envelope.h"
#include "kube/api_client.h"
#include "kube/kubeconfig.h"
#include "kube/objects.h"
#include "kube/pod_protocol.h"
#include "kube/token_request.h"

using nlohmann::json;
using namespace shmipam;
namespace protocol = kube::protocol;

namespace {

using base::envelope::answer;
constexpr auto fail = base::envelope::answer_error;

// The kubeconfig is read here, on every run: never a cached token.
Expected<std::unique_ptr<kube::ApiClient>> client_for(const protocol::Api& api) {
    auto cfg = kube::read_kubeconfig(api.kubeconfig);
    if (!cfg) return cfg.error();
    // Said on every run, on stderr (the plugin's: the runtime's log), as it is allowed.
    if (!cfg->verify_tls) {
        std::cerr << "shmipam-kube: warning: kubeconfig " << api.kubeconfig
                  << " sets insecure-skip-tls-verify: the API server's certificate is not "
                     "verified, so whoever can reach this node's traffic can answer as the API "
                     "server; give its certificate-authority instead\n";
    }
    return std::make_unique<kube::ApiClient>(std::move(*cfg),
                                             std::chrono::milliseconds(api.budget_ms),
                                             std::chrono::milliseconds(api.connect_timeout_ms));
}

int read_pod(const protocol::ReadPod& r) {
    auto client = client_for(r.api);
    if (!client) return fail(client.error());
    const kube::Resource res = kube::pod_resource(r.namespace_, r.name);
    const std::string url = (*client)->url(res.path());
    auto obj = (*client)->get_object(res);
    if (!obj) return fail(obj.error());
    // Not created yet (the runtime sets a sandbox up for a pod the API server has), or deleted
    // meanwhile: either way a later try sees the truth.
    if (!*obj) {
        return fail(make_error(Code::kTryAgainLater, "GET " + url + ": pod " + r.namespace_ + "/" +
                                                         r.name + " is not in the API server"));
    }
    auto pod = kube::decode_pod(**obj, r.namespace_, r.name, "GET " + url);
    if (!pod) return fail(pod.error());
    return answer(protocol::to_json(*pod));
}

// One GET per set, then one per pod, then one per VM, in the order asked, over one connection;
// a set, a pod or a VM that is not there is an answer (exists: false), not an error.
int read_statefulsets(const protocol::ReadStatefulSets& r) {
    auto client = client_for(r.api);
    if (!client) return fail(client.error());
    protocol::StatefulSetsAnswer out;
    for (const auto& s : r.sets) {
        const kube::Resource res = kube::statefulset_resource(s.namespace_, s.name);
        auto obj = (*client)->get_object(res);
        if (!obj) return fail(obj.error());
        if (!*obj) {
            protocol::StatefulSetAnswer gone;
            gone.namespace_ = s.namespace_;
            gone.name = s.name;
            out.sets.push_back(std::move(gone));
            continue;
        }
        auto set = kube::decode_statefulset(**obj, s.namespace_, s.name,
                                            "GET " + (*client)->url(res.path()));
        if (!set) return fail(set.error());
        out.sets.push_back(std::move(*set));
    }
    for (const auto& p : r.pods) {
        const kube::Resource res = kube::pod_resource(p.namespace_, p.name);
        auto obj = (*client)->get_object(res);
        if (!obj) return fail(obj.error());
        protocol::PodPlacement where{p.namespace_, p.name, false, ""};
        if (*obj) {
            auto pod =
                kube::decode_pod(**obj, p.namespace_, p.name, "GET " + (*client)->url(res.path()));
            if (!pod) return fail(pod.error());
            where.exists = true;
            where.node_name = pod->node_name;
        }
        out.pods.push_back(std::move(where));
    }
    for (const auto& v : r.vms) {
        const kube::Resource res = kube::virtualmachine_resource(v.namespace_, v.name);
        auto obj = (*client)->get_object(res);
        if (!obj) return fail(obj.error());
        protocol::VmAnswer vm{v.namespace_, v.name, false, false};
        if (*obj) {
            auto decoded =
                kube::decode_vm(**obj, v.namespace_, v.name, "GET " + (*client)->url(res.path()));
            if (!decoded) return fail(decoded.error());
            vm = *decoded;
        }
        out.vms.push_back(std::move(vm));
    }
    return answer(protocol::to_json(out));
}

// TokenRequest for shmipamctl kubeconfig (kube/token_request.h).
int request_token(const protocol::RequestToken& r) {
    auto client = client_for(r.api);
    if (!client) return fail(client.error());
    auto issued =
        kube::request_token(**client, r.namespace_, r.service_account, r.expiration_seconds);
    if (!issued) return fail(issued.error());
    return answer(protocol::to_json(protocol::TokenAnswer{issued->token, issued->expires_at}));
}

}  // namespace

SHMIPAM_STAMP_BUILD_VERSION();  // read by shmipamctl install

int main() {
    return base::envelope::helper_main(protocol::kProtocol, [](std::string_view text) {
        auto req = protocol::decode(text);
        if (!req) return fail(req.error());
        if (const auto* p = std::get_if<protocol::ReadPod>(&*req)) return read_pod(*p);
        if (const auto* t = std::get_if<protocol::RequestToken>(&*req)) return request_token(*t);
        return read_statefulsets(std::get<protocol::ReadStatefulSets>(*req));
    });
}
