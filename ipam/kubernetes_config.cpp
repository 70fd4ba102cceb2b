#include "ipam/kubernetes_config.h"

#include "ipam/config_fields.h"
#include "kube/pod_protocol.h"

namespace shmipam::ipam {

using nlohmann::json;
using namespace config_fields;  // NOLINT(google-build-using-namespace): the field readers

namespace {

// A positive whole number of at most `max`; `def` when absent.
Expected<uint64_t> positive(const json& obj, const char* key, const std::string& field,
                            uint64_t def, uint64_t max) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return def;
    if (!it->is_number_unsigned() || it->get<uint64_t>() == 0 || it->get<uint64_t>() > max) {
        return make_error(Code::kInvalidConfig,
                          field + " must be a whole number from 1 to " + std::to_string(max));
    }
    return it->get<uint64_t>();
}

Expected<bool> boolean(const json& obj, const char* key, const std::string& field, bool def) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return def;
    if (!it->is_boolean()) return type_error(field, "a boolean");
    return it->get<bool>();
}

// A minute: longer would hold a pod's ADD past the runtime's own timeout.
constexpr uint64_t kMaxBudgetMs = 60'000;
// A day: a recheck rarer than that leaves addresses of deleted StatefulSets held for days.
constexpr uint64_t kMaxRecheckS = 86'400;

}  // namespace

Expected<std::optional<KubernetesApi>> parse_kubernetes(const json& ipam) {
    auto it = ipam.find("kubernetes");
    if (it == ipam.end() || it->is_null()) return std::optional<KubernetesApi>{};
    if (!it->is_object()) return type_error("ipam.kubernetes", "an object");
    KubernetesApi api;
    auto kubeconfig = opt_string(*it, "kubeconfig", "ipam.kubernetes.");
    if (!kubeconfig) return kubeconfig.error();
    if (kubeconfig->empty()) {
        // An object without its one required field is a mistake (a misspelt "kubeConfig"),
        // never a quiet "no API".
        return make_error(Code::kInvalidConfig,
                          "ipam.kubernetes needs \"kubeconfig\": the path of the kubeconfig the "
                          "Kubernetes helper reads (remove ipam.kubernetes to read no pod from "
                          "the API server)");
    }
    api.kubeconfig = *kubeconfig;
    auto helper = opt_string(*it, "helper", "ipam.kubernetes.");
    if (!helper) return helper.error();
    api.helper = *helper;
    auto budget = positive(*it, "budgetMs", "ipam.kubernetes.budgetMs",
                           kube::protocol::kDefaultBudgetMs, kMaxBudgetMs);
    if (!budget) return budget.error();
    api.budget_ms = *budget;
    auto connect = positive(*it, "connectTimeoutMs", "ipam.kubernetes.connectTimeoutMs",
                            kube::protocol::kDefaultConnectTimeoutMs, kMaxBudgetMs);
    if (!connect) return connect.error();
    // A connection has at most the whole budget, whatever is written.
    api.connect_timeout_ms = std::min(*connect, api.budget_ms);
    auto by_default =
        boolean(ipam, "statefulSetFixedIPByDefault", "ipam.statefulSetFixedIPByDefault", true);
    if (!by_default) return by_default.error();
    api.statefulset_default = *by_default;
    auto recheck = positive(ipam, "statefulSetRecheckS", "ipam.statefulSetRecheckS",
                            kDefaultStatefulSetRecheckS, kMaxRecheckS);
    if (!recheck) return recheck.error();
    api.recheck_s = *recheck;
    return std::optional<KubernetesApi>{std::move(api)};
}

}  // namespace shmipam::ipam
