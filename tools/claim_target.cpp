#include "tools/claim_target.h"

#include "ipam/config.h"
#include "ipam/fixed_claim.h"
#include "ipam/pool_state.h"
#include "kube/names.h"
#include "pools/pool_dir.h"
#include "pools/selection.h"
#include "pools/sticky.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

// The policy words an operator may write besides the annotation's syntax.
constexpr const char* kPolicyNever = "never";
constexpr const char* kPolicyWhileSetWants = "statefulset";
constexpr const char* kPolicyWhileVmExists = "vm";

}  // namespace

Expected<ClaimNetwork> read_claim_network(const std::string& path,
                                          const std::string& default_run_dir) {
    auto text = read_input(path);
    if (!text) return text.error();
    // The plugin's own reader, knobs and all: a claim that creates the state (a rebuilt node)
    // makes it as the plugin's first ADD would.
    auto settings = ipam::read_network_text(*text, path, {default_run_dir, ""});
    if (!settings) return settings.error();
    ClaimNetwork out;
    out.path = path;
    out.network = std::move(settings->network);
    if (!settings->pools) {
        if (out.network.range_sets.empty()) {
            return make_error(Code::kInvalidConfig, path + " has neither ranges nor poolsDir");
        }
        return out;
    }
    out.pools_dir = settings->pools->pools_dir;
    out.cluster = settings->pools->cluster.has_value();
    auto catalog = pools::load_pools_dir(out.pools_dir);
    if (!catalog) return catalog.error();
    out.catalog = std::make_shared<pools::Catalog>(std::move(*catalog));
    return out;
}

Expected<ClaimTarget> claim_target(const ClaimNetwork& net, const engine::IpAddress& address,
                                   const std::string& want_state) {
    ClaimTarget t;
    if (!net.catalog) {
        bool in_range = false;
        for (const auto& set : net.network.range_sets) {
            in_range = in_range || engine::range_index_for(set, address).has_value();
        }
        if (!in_range) {
            return make_error(Code::kInvalidConfig, address.to_string() +
                                                        " is in no range of network " +
                                                        net.network.name + " (" + net.path + ")");
        }
        t.state = net.network.name;
        t.cfg = std::make_unique<engine::NetworkConfig>(net.network);
    } else {
        const pools::IpPool* holder = nullptr;
        for (const pools::IpPool& p : net.catalog->pools()) {
            if (p.family == address.family &&
                pools::allocatable(p, *net.catalog).contains(address)) {
                holder = &p;
                break;
            }
        }
        if (holder == nullptr) {
            return make_error(
                Code::kInvalidConfig,
                address.to_string() + " is in no pool's allocatable addresses in " + net.pools_dir);
        }
        ipam::Request r;
        r.network = net.network;
        t.state = "pool/" + holder->name;
        t.cfg = ipam::allocating_config(r, ipam::pool_state_name(holder->name), holder->subnet,
                                        holder->gateway, pools::allocatable(*holder, *net.catalog));
        t.network_tag = ipam::network_tag(net.network.name);
    }
    if (!want_state.empty() && want_state != t.state) {
        return make_error(Code::kInvalidConfig, address.to_string() + " belongs to " + t.state +
                                                    " in " + net.path + ", not to " + want_state);
    }
    return t;
}

Expected<PodName> parse_pod_name(const std::string& text) {
    const size_t slash = text.find('/');
    PodName n;
    if (slash != std::string::npos) {
        n.namespace_ = text.substr(0, slash);
        n.name = text.substr(slash + 1);
    }
    if (slash == std::string::npos) {
        return make_error(Code::kInvalidConfig,
                          "\"" + text + "\" is not <namespace>/<name> (Kubernetes names)");
    }
    // A claim for a name no pod can have would never be bound (kube/names.h).
    if (auto why = kube::not_a_dns_label(n.namespace_)) {
        return make_error(Code::kInvalidConfig, "\"" + text + "\": the namespace \"" +
                                                    n.namespace_ +
                                                    "\" is no Kubernetes name: " + *why);
    }
    if (auto why = kube::not_a_dns_subdomain(n.name)) {
        return make_error(Code::kInvalidConfig, "\"" + text + "\": the name \"" + n.name +
                                                    "\" is no Kubernetes name: " + *why);
    }
    return n;
}

std::string claim_key(const PodName& who, const std::string& ifname, bool vm) {
    pools::StickyIdentity id;
    id.kind = vm ? pools::StickyKind::kKubeVirt : pools::StickyKind::kStatefulSet;
    id.namespace_ = who.namespace_;
    id.name = who.name;
    id.ifname = ifname;
    return id.key();
}

Expected<uint64_t> parse_policy(const std::string& text) {
    if (text == kPolicyNever) return format::kKeepIdleForever;
    if (text == kPolicyWhileSetWants || text == kPolicyWhileVmExists) {
        return format::kKeepIdleWhileOwnerWants;
    }
    if (text.empty()) {
        return make_error(Code::kInvalidConfig,
                          "empty policy: say never, statefulset, vm, 0, hours or a duration");
    }
    pools::PodFacts facts;
    facts.annotations[pools::kClaimPolicyAnnotation] = text;
    auto p = pools::claim_policy(facts);
    if (!p) return make_error(Code::kInvalidConfig, "policy: " + p.error().msg);
    return ipam::keep_idle_of(*p);
}

std::string policy_word(uint64_t keep_idle, bool vm) {
    if (keep_idle == format::kKeepIdleForever) return kPolicyNever;
    if (keep_idle == format::kKeepIdleWhileOwnerWants) {
        return vm ? kPolicyWhileVmExists : kPolicyWhileSetWants;
    }
    if (keep_idle == format::kKeepIdleNone) return "0";
    return std::to_string(keep_idle - 1) + "s";
}

}  // namespace shmipam::tools
