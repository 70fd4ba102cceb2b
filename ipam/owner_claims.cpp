#include "ipam/owner_claims.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "engine/addr/fingerprint.h"
#include "ipam/helper_exec.h"
#include "ipam/owner_recheck_record.h"
#include "ipam/pod_lookup.h"
#include "ipam/pool_catalog.h"
#include "ipam/pool_state.h"
#include "kube/pod_protocol.h"
#include "pools/sticky.h"

namespace shmipam::ipam {

namespace {

namespace protocol = kube::protocol;

// The node's last walk: its mtime, under <runDir> (a reboot starts afresh, which only checks
// sooner). Taken under its lock, so that of the invocations that find the walk due one walks;
// a walk still running when the next period comes may overlap the next one, which is harmless
// (each frees only idle claims, by their fingerprints).
constexpr const char* kRecheckMarker = ".statefulset-recheck";

std::string marker_path(const Request& r) {
    return r.network.run_dir + "/" + kRecheckMarker;
}

// One claim kept while its owner wants it, found idle in opened[state]: a StatefulSet pod's
// (`member`: its set and ordinal) or a KubeVirt VM's (no member: while the VM exists).
struct OwnedClaim {
    size_t state = 0;
    engine::Fingerprint fp;
    pools::StickyIdentity id;
    std::optional<pools::SetMember> member;
};

using SetKey = std::pair<std::string, std::string>;  // namespace, set

// What the API server says of `claims` now: their sets, and, when asked, where their pods run;
// their VMs.
struct OwnersNow {
    std::map<SetKey, pools::SetState> sets;
    std::map<SetKey, protocol::PodPlacement> pods;  // (namespace, pod)
    std::map<SetKey, protocol::VmAnswer> vms;       // (namespace, VM)
};

// Reads the sets of `claims`, and with `with_pods` their pods too, and their VMs, in one helper
// run, or says why it could not.
Expected<OwnersNow> read_owners(const KubernetesApi& api, const std::vector<OwnedClaim>& claims,
                                bool with_pods) {
    protocol::ReadStatefulSets ask{api.api(), {}, {}, {}};
    std::set<SetKey> asked, asked_vms;  // a VM's claims of several interfaces ask once
    for (const OwnedClaim& c : claims) {
        if (!c.member) {
            if (asked_vms.insert({c.id.namespace_, c.id.name}).second) {
                ask.vms.push_back({c.id.namespace_, c.id.name});
            }
            continue;
        }
        const SetKey k{c.id.namespace_, c.member->set};
        if (asked.insert(k).second) ask.sets.push_back({k.first, k.second});
        if (with_pods) ask.pods.push_back({c.id.namespace_, c.id.name});
    }
    OwnersNow out;
    if (ask.sets.empty() && ask.vms.empty()) return out;
    auto text =
        run_helper(kube_helper_path(api), protocol::encode(ask), -1, "ipam.kubernetes.helper");
    auto answer = text ? protocol::statefulsets_answer(*text)
                       : Expected<protocol::StatefulSetsAnswer>(text.error());
    if (!answer) return answer.error();
    for (const auto& s : answer->sets) {
        out.sets[{s.namespace_, s.name}] =
            pools::SetState{s.exists, s.deleting, s.ordinals_start, s.replicas};
    }
    for (const auto& p : answer->pods) out.pods[{p.namespace_, p.name}] = p;
    for (const auto& v : answer->vms) out.vms[{v.namespace_, v.name}] = v;
    return out;
}

// The Node object's name of this node, for the moved-pod check in local pool mode:
// ipam.nodeName, else the node-name file the install container writes; "" when neither is
// there (the host name pool mode otherwise uses may not be the Node's name, and every claim
// would look moved), and in cluster mode (a fixed claim moves with its pod through the store).
std::string node_for_moved_pods(const Request& r) {
    if (!r.pools || r.pools->cluster) return "";
    if (r.pools->node_name_from_config) return r.pools->node_name;
    auto named = read_node_name_file(r.pools->node_name_file);
    return named ? *named : "";
}

// Whether the claim's pod runs on another node now: the API server has it, scheduled, on a
// node that is not `node` (never for an unscheduled pod, nor without a node name; never for a
// VM's claim, whose launcher pods have names of their own).
bool moved_away(const OwnersNow& now, const OwnedClaim& c, const std::string& node) {
    if (node.empty() || !c.member) return false;
    auto p = now.pods.find({c.id.namespace_, c.id.name});
    return p != now.pods.end() && p->second.exists && !p->second.node_name.empty() &&
           p->second.node_name != node;
}

// Frees each claim whose set no longer wants its pod, or whose pod runs on another node now
// (local pool mode: the pod took an address there; this node's claim would be held for
// nothing); the source is told per state (in cluster mode a fixed-address pool gives the
// store's claim up). What it did, for the record; when the API cannot be read every claim is
// kept until the next check.
RecheckOutcome release_unwanted(const Request& r, std::vector<OpenState>& opened,
                                const std::vector<OwnedClaim>& claims, AddressSource& source) {
    RecheckOutcome outcome;
    const std::string node = node_for_moved_pods(r);
    const auto now = read_owners(*r.kubernetes, claims, !node.empty());
    if (!now) {
        outcome.error = now.error().msg;
        outcome.claims_kept_on_error = claims.size();
        return outcome;
    }
    std::map<size_t, size_t> released;  // state -> claims freed
    for (const OwnedClaim& c : claims) {
        if (c.member) {
            auto set = now->sets.find({c.id.namespace_, c.member->set});
            if (set == now->sets.end()) continue;
            if (pools::statefulset_wants(set->second, c.member->ordinal) &&
                !moved_away(*now, c, node)) {
                continue;
            }
        } else {
            auto vm = now->vms.find({c.id.namespace_, c.id.name});
            if (vm == now->vms.end() || (vm->second.exists && !vm->second.deleting)) continue;
        }
        auto gone = opened[c.state].allocator().release_claims(
            [&](const engine::ClaimView& v) { return v.fp == c.fp; }, /*in_use_too=*/false,
            /*dry_run=*/false);
        if (gone && !gone->empty()) released[c.state] += gone->size();
    }
    for (const auto& [state, n] : released) {
        OpenState& s = opened[state];
        (void)source.after_gc(object_name_of_state(s.name), n, *s.store);
        outcome.claims_freed += n;
    }
    return outcome;
}

// Adds the check's outcome to the node's record and, when it failed, says so: on the plugin's
// stderr (a DEL's check: the runtime logs it) and in the invocation log when it is on.
void report(const Request& r, const RecheckOutcome& outcome) {
    (void)add_recheck_outcome(r.network.run_dir, outcome, int64_t(::time(nullptr)));
    if (!outcome.error) return;
    const Error e = make_error(
        Code::kTryAgainLater,
        std::string(outcome.walk ? "the StatefulSet recheck" : "the DEL's StatefulSet check") +
            " could not read the owners (StatefulSets, VMs) of " +
            std::to_string(outcome.claims_kept_on_error) +
            " idle fixed claim(s), kept until the next check: " + *outcome.error);
    std::fprintf(stderr, "shmipam: %s\n", e.msg.c_str());
    if (r.log_aside) r.log_aside("RECHECK", e);
}

// The idle claims of opened[state] kept while their set wants the pod: the one of `only`
// (found by its key's fingerprint, whatever its length), or every one whose key reads back
// whole (a key longer than the entry's 72 bytes reads back truncated, and its fingerprint says
// so: such a claim is checked at its pod's DEL only).
void collect(std::vector<OpenState>& opened, size_t state,
             const std::optional<pools::StickyIdentity>& only, std::vector<OwnedClaim>& out) {
    if (!opened[state].store) return;
    const std::optional<engine::Fingerprint> wanted =
        only ? std::optional(engine::fingerprint(only->key(), only->ifname)) : std::nullopt;
    for (const engine::ClaimView& v : opened[state].allocator().claims()) {
        if (v.keep_idle != format::kKeepIdleWhileOwnerWants ||
            v.use != engine::ClaimView::Use::kIdle) {
            continue;
        }
        std::optional<pools::StickyIdentity> id;
        if (wanted) {
            if (!(v.fp == *wanted)) continue;
            id = only;
        } else {
            id = pools::identity_of_key(v.key);
            if (!id || !(engine::fingerprint(v.key, id->ifname) == v.fp)) continue;
        }
        if (id->kind == pools::StickyKind::kKubeVirt) {
            out.push_back({state, v.fp, *id, std::nullopt});
            continue;
        }
        auto member = pools::statefulset_member(id->name);
        if (!member) continue;
        out.push_back({state, v.fp, *id, *member});
    }
}

// Whether the marker says a walk is due: never walked (empty), older than the period, or ahead
// of the clock by more than it (a clock set back).
bool marker_due(const struct stat& st, uint64_t recheck_s) {
    const time_t now = ::time(nullptr);
    return st.st_size == 0 || now - st.st_mtime >= time_t(recheck_s) ||
           st.st_mtime > now + time_t(recheck_s);
}

// Whether the node's last walk is older than the period; then the marker is touched (under its
// lock: one walker at a time) and true is returned.
bool claim_the_walk(const Request& r) {
    const int fd = ::open(marker_path(r).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    bool due = false;
    struct stat st {};
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::fstat(fd, &st) == 0) {
        due = marker_due(st, r.kubernetes->recheck_s);
        if (due) {
            if (st.st_size == 0) (void)!::write(fd, "1", 1);
            (void)::futimens(fd, nullptr);
        }
    }
    ::close(fd);
    return due;
}

bool walk_due(const Request& r) {
    struct stat st {};
    return ::stat(marker_path(r).c_str(), &st) != 0 || marker_due(st, r.kubernetes->recheck_s);
}

void walk(const Request& r) {
    if (!claim_the_walk(r)) return;
    auto catalog = load_catalog(r);
    if (!catalog) return;
    std::vector<OpenState> opened;
    (void)open_every_state(r, **catalog, opened);
    std::vector<OwnedClaim> claims;
    for (size_t i = 0; i < opened.size(); ++i) collect(opened, i, std::nullopt, claims);
    RecheckOutcome outcome;
    if (!claims.empty()) {
        auto source = make_source(r);
        outcome = release_unwanted(r, opened, claims, *source);
    }
    outcome.walk = true;
    report(r, outcome);
}

}  // namespace

void release_unwanted_after_del(const Request& r, std::vector<OpenState>& opened,
                                AddressSource& source) {
    if (!r.kubernetes) return;
    // The DEL reads no pod: the claim its name could have (a StatefulSet pod's, or the VM's a
    // launcher pod's name tells), found by that key's fingerprint or not at all.
    std::optional<pools::StickyIdentity> own;
    if (pools::statefulset_member(r.pod.name)) {
        own = pools::StickyIdentity{pools::StickyKind::kStatefulSet, r.pod.namespace_, r.pod.name,
                                    r.key.ifname};
    } else if (auto vm = pools::launcher_vm_name(r.pod.name)) {
        own = pools::StickyIdentity{pools::StickyKind::kKubeVirt, r.pod.namespace_, *vm,
                                    r.key.ifname};
    }
    if (!own) return;
    std::vector<OwnedClaim> claims;
    for (size_t i = 0; i < opened.size(); ++i) collect(opened, i, own, claims);
    if (claims.empty()) return;
    report(r, release_unwanted(r, opened, claims, source));
}

void schedule_owner_recheck(const Request& r, Upkeep& upkeep) {
    if (!r.kubernetes || !r.pools || !walk_due(r)) return;
    auto kept = std::make_shared<const Request>(r);
    auto before = std::move(upkeep.after_answer);
    upkeep.after_answer = [kept, before = std::move(before)] {
        if (before) before();
        // The walk may wait for the API server (up to the budget): not in the time of the pod
        // whose call happened to find it due, since the runtime waits for the plugin to exit.
        // A child of its own session, its output to /dev/null (the runtime reads the plugin's
        // stdout to its end), walks; the plugin exits at once.
        const pid_t child = ::fork();
        if (child != 0) return;  // the plugin (or fork failed: the next call walks)
        const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
            for (int fd : {0, 1, 2}) ::dup2(null, fd);
        }
        ::setsid();
        walk(*kept);
        ::_exit(0);
    };
}

}  // namespace shmipam::ipam
