// shmipamctl claims create: a fixed-address claim made by hand (the fixed-IP design document's
// re-creation of a deleted claim): exactly the claim the pod's ADD would have made (its key,
// policy and address), idle with no sandbox, so that the pod's next ADD gets that address. A dry
// run unless --apply. In cluster mode the claim of a fixedAddressPools pool goes to etcd first
// with its policy (tools/claim_store.h).
#include <CLI/CLI.hpp>
#include <iostream>

#include "tools/claim_plan.h"
#include "tools/claim_store.h"
#include "tools/render/claim_plan.h"
#include "tools/render/json.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

// The longest interface name Linux takes (IFNAMSIZ less the terminator).
constexpr size_t kMaxIfname = 15;

struct CreateOptions {
    std::string config, pod, ifname = "eth0", address, policy = "never";
    bool vm = false;
    bool apply = false;
};

int cmd_claims_create(const CommonOptions& common, const CreateOptions& o) {
    // Every input checked before any state is opened: a refusal changes nothing.
    auto who = parse_pod_name(o.pod);
    if (!who) return cannot_read(who.error());
    if (o.ifname.empty() || o.ifname.size() > kMaxIfname ||
        o.ifname.find_first_of("/: ") != std::string::npos) {
        return cannot_read("\"" + o.ifname + "\" is not an interface name");
    }
    auto address = engine::IpAddress::parse(o.address);
    if (!address) return cannot_read("not an address: " + o.address);
    auto keep_idle = parse_policy(o.policy);
    if (!keep_idle) return cannot_read(keep_idle.error());
    auto net = read_claim_network(o.config, common.run_dir);
    if (!net) return cannot_read(net.error());
    const WantedClaim wanted{*who, o.vm, o.ifname, {*address}, *keep_idle};
    auto plan = plan_claim(*net, wanted);
    if (!plan) return cannot_read(plan.error());
    // Cluster mode: the store's claim first, as the plugin's ADD takes it before its local one.
    if (auto st = hold_in_cluster_store(*net, *plan, o.apply); !st) return cannot_read(st.error());
    if (o.apply && plan->status == ClaimPlan::Status::kCreate) {
        if (auto st = apply_claim(*net, *plan); !st) return cannot_read(st.error());
    }
    std::cout << (common.json ? json_text(claim_plans_json({*plan}, o.apply))
                              : claim_plans_text({*plan}, o.apply));
    switch (plan->status) {
        case ClaimPlan::Status::kConflict:
            std::cerr << "shmipamctl: refused: " << plan->why << "\n";
            return kExitCannotRead;
        case ClaimPlan::Status::kCreate:
            return kExitViolations;  // a dry run that found work
        default:
            return kExitClean;
    }
}

}  // namespace

void register_claims_create(CLI::App& claims, CommonOptions& common, int& exit_code) {
    auto* verb = claims.add_subcommand(
        "create",
        "make a StatefulSet pod's (or VM's) fixed-address claim by hand, idle, as its ADD "
        "would have (dry run unless --apply)");
    auto o = std::make_shared<CreateOptions>();
    verb->add_option("--config", o->config,
                     "the pod's CNI network config file (its ranges or poolsDir, runDir, "
                     "dataDir)")
        ->required();
    verb->add_option("--pod", o->pod, "the pod (or VM with --vm): <namespace>/<name>")->required();
    verb->add_option("--address", o->address, "the address the claim holds")->required();
    verb->add_option("--ifname", o->ifname, "the pod's interface")->capture_default_str();
    verb->add_option("--policy", o->policy,
                     "never, statefulset (while its StatefulSet wants it), vm (while its VM "
                     "exists), 0 (freed at DEL), "
                     "hours, or a duration (90m, 48h)")
        ->capture_default_str();
    verb->add_flag("--vm", o->vm, "a KubeVirt VM's claim (vm:<ns>/<vm>/<ifname>)");
    verb->add_flag("--apply", o->apply, "make the claim");
    add_json_flag(*verb, common);
    verb->callback([&common, o, &exit_code] { exit_code = cmd_claims_create(common, *o); });
}

}  // namespace shmipam::tools
