#include "tools/claim_target.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ipam/config_fields.h"
#include "ipam/fixed_claim.h"
#include "ipam/pool_config.h"
#include "ipam/pool_state.h"
#include "kube/names.h"
#include "pools/pool_dir.h"
#include "pools/selection.h"
#include "pools/sticky.h"

namespace shmipam::tools {

using nlohmann::json;
namespace cf = ipam::config_fields;

namespace {

// The policy words an operator may write besides the annotation's syntax.
constexpr const char* kPolicyNever = "never";
constexpr const char* kPolicyWhileSetWants = "statefulset";
constexpr const char* kPolicyWhileVmExists = "vm";

Status read_ranges(const json& ipam, engine::NetworkConfig& network) {
    std::vector<engine::RangeSet> sets;
    auto legacy = cf::parse_range_spec(ipam, "ipam");
    if (!legacy) return legacy.error();
    if (!legacy->subnet.empty()) {
        auto set = engine::make_range_set(std::vector<engine::RangeSpec>{*legacy});
        if (!set) return make_error(Code::kInvalidConfig, "invalid range set: " + set.error().msg);
        sets.push_back(*set);
    }
    if (auto r = ipam.find("ranges"); r != ipam.end() && !r->is_null()) {
        auto rs = cf::parse_range_sets(*r, "ipam.ranges");
        if (!rs) return rs.error();
        sets.insert(sets.end(), rs->begin(), rs->end());
    }
    if (auto st = engine::check_range_sets(sets); !st) return st.error();
    network.range_sets = std::move(sets);
    return Ok{};
}

}  // namespace

Expected<ClaimNetwork> read_claim_network(const std::string& path,
                                          const std::string& default_run_dir) {
    std::ifstream in(path);
    if (!in) return make_error(Code::kIo, "cannot read " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    const json doc = json::parse(ss.str(), nullptr, false);
    if (doc.is_discarded() || !doc.is_object() || !doc.contains("ipam") ||
        !doc["ipam"].is_object() || !doc.contains("name") || !doc["name"].is_string()) {
        return make_error(Code::kDecode,
                          path + " is not a network config with a name and an ipam section");
    }
    const json& ipam = doc["ipam"];
    ClaimNetwork out;
    out.path = path;
    out.network.name = doc["name"].get<std::string>();
    out.network.run_dir = default_run_dir;
    for (auto [key, field] :
         {std::pair{"runDir", &out.network.run_dir}, std::pair{"dataDir", &out.network.data_dir},
          std::pair{"poolsDir", &out.pools_dir}}) {
        auto v = cf::opt_string(ipam, key, "ipam.");
        if (!v) return v.error();
        if (!v->empty()) *field = *v;
    }
    out.cluster = ipam.contains("etcd") && !ipam["etcd"].is_null();
    // The state's knobs as the plugin reads them: a claim that creates the state (a rebuilt node)
    // makes it as the plugin's first ADD would.
    if (auto st = cf::parse_state_knobs(ipam, out.network); !st) return st.error();
    if (out.cluster) ipam::apply_cluster_block_sizes(ipam, out.network);
    if (out.pools_dir.empty()) {
        if (auto st = read_ranges(ipam, out.network); !st) return st.error();
        if (out.network.range_sets.empty() && !out.cluster) {
            return make_error(Code::kInvalidConfig, path + " has neither ranges nor poolsDir");
        }
        return out;
    }
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
