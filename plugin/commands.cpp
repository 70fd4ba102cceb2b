#include "plugin/commands.h"

#include <nlohmann/json.hpp>

#include "ipam/operations.h"
#include "plugin/cni_args.h"
#include "plugin/cni_result.h"
#include "plugin/netconf.h"
#include "plugin/resolv_conf.h"

namespace shmipam::cni {

using nlohmann::json;

namespace {

constexpr const char* kDefaultErrorVersion = "1.1.0";

// The command's answer; what the process keeps goes with it.
Invocation answer(const CniEnv& env, const std::string& v, const ipam::Request& r,
                  const json& dns) {
    ipam::Upkeep upkeep;
    Invocation inv;
    switch (env.command) {
        case Command::kAdd: {
            auto out = ipam::add(r, upkeep);
            inv = out ? succeed(make_result(v, *out, dns)) : fail(v, out.error());
            break;
        }
        case Command::kDel:
            if (auto st = ipam::del(r, upkeep); !st) inv = fail(v, st.error());
            break;
        case Command::kCheck:
            if (auto st = ipam::check(r, upkeep); !st) inv = fail(v, st.error());
            break;
        case Command::kGc:
            if (auto st = ipam::gc(r, upkeep); !st) inv = fail(v, st.error());
            break;
        case Command::kStatus:
            if (auto st = ipam::status(r, upkeep); !st) inv = fail(v, st.error());
            break;
        case Command::kVersion:
            break;
    }
    inv.after_answer = std::move(upkeep.after_answer);
    inv.keep_until_exit = std::move(upkeep.keep_until_exit);
    return inv;
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

// The answer to a parsed config; `record` (the invocation log's, when on, with `log`) gets the
// pod.
Invocation answer_config(const CniEnv& env, const json& doc, const LogConfig* log,
                         InvocationRecord* record);

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
    Invocation inv = answer_config(*env, doc, log ? &*log : nullptr, log ? &record : nullptr);
    if (log) {
        inv.log = std::move(log);
        inv.record = std::move(record);
    }
    return inv;
}

namespace {

Invocation answer_config(const CniEnv& env, const json& doc, const LogConfig* log,
                         InvocationRecord* record) {
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
    auto parsed = parse_request(doc, env, *args);
    if (!parsed) return fail(v, parsed.error());
    ipam::Request& request = *parsed;
    if (log != nullptr && record != nullptr) {
        // A line of its own, as the command's: its cmd, the error's code and message.
        request.log_aside = [cfg = *log, line = *record](const std::string& command,
                                                         const Error& e) {
            InvocationRecord failed = line;
            failed.command = command;
            failed.code = int(e.code);
            failed.message = e.msg;
            failed.debug_config.clear();
            append_invocation_log(cfg, failed);
        };
    }
    json dns = json::object();
    if (env.command == Command::kAdd && !request.resolv_conf.empty()) {
        auto d = read_resolv_conf(request.resolv_conf);
        if (!d) return fail(v, d.error());
        dns = *d;
    }
    return answer(env, v, request, dns);
}

}  // namespace

}  // namespace shmipam::cni
