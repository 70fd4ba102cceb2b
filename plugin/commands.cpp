#include "plugin/commands.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/ops/allocator.h"
#include "engine/ops/open_network.h"
#include "engine/state/journal_compaction.h"
#include "engine/state/network_store.h"
#include "plugin/cni_args.h"
#include "plugin/cni_result.h"
#include "plugin/fixed_ip.h"
#include "plugin/netconf.h"
#include "plugin/pool_commands.h"
#include "plugin/resolv_conf.h"

namespace shmipam::cni {

using nlohmann::json;

namespace {

constexpr const char* kDefaultErrorVersion = "1.1.0";

Expected<std::vector<engine::IpAddress>> requested_addresses(const NetConf& nc) {
    std::vector<engine::IpAddress> out;
    for (const auto& s : nc.requested_ips) {
        auto a = parse_requested_ip(s);
        if (!a) return a.error();
        out.push_back(*a);
    }
    return out;
}

// CHECK: the attachment must hold exactly the addresses prevResult lists in our ranges.
Status compare_with_prev_result(const NetConf& nc,
                                const std::vector<engine::AllocatedAddress>& held) {
    if (!nc.prev_result.is_object() || !nc.prev_result.contains("ips")) return Ok{};
    const json& ips = nc.prev_result["ips"];
    if (!ips.is_array()) return make_error(Code::kDecode, "prevResult.ips must be an array");
    std::set<std::pair<int, engine::u128>> ours, theirs;
    for (const auto& a : held) ours.insert({int(a.address.family), a.address.value});
    for (const auto& ip : ips) {
        if (!ip.is_object() || !ip.contains("address") || !ip["address"].is_string()) {
            return make_error(Code::kDecode, "prevResult.ips[].address must be a string");
        }
        auto c = engine::Cidr::parse(ip["address"].get<std::string>());
        if (!c)
            return make_error(Code::kDecode, "invalid prevResult address " + ip["address"].dump());
        bool in_our_ranges = false;
        for (const auto& set : nc.network.range_sets) {
            if (engine::range_index_for(set, c->address)) in_our_ranges = true;
        }
        if (in_our_ranges) theirs.insert({int(c->address.family), c->address.value});
    }
    if (ours != theirs) {
        std::string have;
        for (const auto& a : held) have += (have.empty() ? "" : ",") + a.address.to_string();
        return make_error(Code::kCheckMismatch,
                          "the addresses allocated to the container differ from prevResult",
                          "allocated: " + have);
    }
    return Ok{};
}

// The command itself, on an opened network.
Invocation answer(const CniEnv& env, const NetConf& nc, const std::string& v,
                  engine::NetworkStore& store, const std::vector<engine::IpAddress>& requested,
                  const CniArgs& args, const json& dns) {
    engine::Allocator alloc(store, nc.network);
    const engine::AttachmentKey key{env.container_id, env.ifname};
    switch (env.command) {
        case Command::kAdd: {
            auto claim = fixed_ip_claim(env, nc, args);
            if (!claim) return fail(v, claim.error());
            engine::AddRequest req{key, requested, {args.pod_namespace, args.pod_name}};
            req.claim = std::move(*claim);
            auto out = alloc.add(req);
            if (!out) return fail(v, out.error());
            return succeed(make_result(v, out->addresses, nc.routes, dns));
        }
        case Command::kDel: {
            if (auto st = alloc.del(key); !st) return fail(v, st.error());
            return Invocation{};
        }
        case Command::kCheck: {
            auto held = alloc.addresses_of(key);
            if (!held) return fail(v, held.error());
            if (auto st = compare_with_prev_result(nc, *held); !st) return fail(v, st.error());
            return Invocation{};
        }
        case Command::kGc: {
            if (!nc.valid_attachments) {
                return fail(v, make_error(Code::kInvalidConfig,
                                          "GC needs \"cni.dev/valid-attachments\" in the config"));
            }
            auto out = alloc.gc(*nc.valid_attachments);
            if (!out) return fail(v, out.error());
            return Invocation{};
        }
        case Command::kStatus: {
            if (auto st = alloc.status(); !st) return fail(v, st.error());
            return Invocation{};
        }
        case Command::kVersion:
            break;
    }
    return Invocation{};
}

}  // namespace

Invocation fail(const std::string& version, const Error& e) {
    Invocation inv;
    inv.stdout_text = make_error_json(version, e).dump() + "\n";
    inv.log_line = "shmipam: error " + std::to_string(int(e.code)) + ": " + e.msg +
                   (e.details.empty() ? "" : " (" + e.details + ")");
    inv.exit_code = 1;
    return inv;
}

Invocation succeed(const json& out) {
    Invocation inv;
    inv.stdout_text = out.dump() + "\n";
    return inv;
}

namespace {

// The answer to a parsed config; `record` (the invocation log's, when on) gets the pod.
Invocation answer_config(const CniEnv& env, const json& doc, InvocationRecord* record);

}  // namespace

Invocation run_plugin(const EnvLookup& env_lookup, std::string_view stdin_data) {
    auto env = read_env(env_lookup);
    if (!env) return fail(kDefaultErrorVersion, env.error());
    if (env->command == Command::kVersion) return succeed(make_version_json());

    json doc = json::parse(stdin_data, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
        return fail(
            kDefaultErrorVersion,
            make_error(Code::kDecode, "error unmarshalling network config: not valid JSON"));
    }
    // The invocation log first, so that a config refused below is logged too.
    std::optional<LogConfig> log;
    InvocationRecord record;
    auto wanted = read_log_config(doc);
    if (!wanted) {
        auto v = read_cni_version(doc);
        return fail(v ? *v : kDefaultErrorVersion, wanted.error());
    }
    if (*wanted) {
        log = std::move(*wanted);
        record.command = env_lookup("CNI_COMMAND").value_or("");
        record.container_id = env_lookup("CNI_CONTAINERID").value_or("");
        record.ifname = env_lookup("CNI_IFNAME").value_or("");
        record.network = doc.contains("name") && doc["name"].is_string() ? doc["name"] : json("");
        if (log->level == LogLevel::kDebug) record.debug_config = masked_ipam(doc);
    }
    Invocation inv = answer_config(*env, doc, log ? &record : nullptr);
    if (log) {
        inv.log = std::move(log);
        inv.record = std::move(record);
    }
    return inv;
}

namespace {

Invocation answer_config(const CniEnv& env, const json& doc, InvocationRecord* record) {
    auto version = read_cni_version(doc);
    if (!version) return fail(kDefaultErrorVersion, version.error());
    const std::string& v = *version;
    if (env.command == Command::kCheck && !version_at_least(v, "0.4.0")) {
        return fail(v, make_error(Code::kIncompatibleVersion, "config version does not allow CHECK",
                                  "cniVersion " + v));
    }
    if ((env.command == Command::kGc || env.command == Command::kStatus) &&
        !version_at_least(v, "1.1.0")) {
        return fail(v, make_error(Code::kIncompatibleVersion,
                                  "config version does not allow GC or STATUS", "cniVersion " + v));
    }
    auto args = parse_cni_args(env.args);
    if (!args) return fail(v, args.error());
    if (record && !args->pod_name.empty()) record->pod = args->pod_namespace + "/" + args->pod_name;
    auto nc = parse_netconf(doc, *args);
    if (!nc) return fail(v, nc.error());
    auto requested = requested_addresses(*nc);
    if (!requested) return fail(v, requested.error());

    json dns = json::object();
    if (env.command == Command::kAdd && !nc->resolv_conf.empty()) {
        auto d = read_resolv_conf(nc->resolv_conf);
        if (!d) return fail(v, d.error());
        dns = *d;
    }

    if (nc->pool_mode) return run_pool_command(env, *nc, v, *requested, *args, dns);

    auto store = engine::open_network(nc->network);
    if (!store) return fail(v, store.error());
    Invocation inv = answer(env, *nc, v, **store, *requested, *args, dns);
    std::shared_ptr<engine::NetworkStore> kept(std::move(*store));
    // An append of ours reached a segment's compaction check: compact once the answer is out.
    if (kept->compaction_due()) {
        inv.after_answer = [kept] { engine::compact_journal_if_due(*kept); };
    }
    inv.keep_until_exit.push_back(std::move(kept));
    return inv;
}

}  // namespace

}  // namespace shmipam::cni
