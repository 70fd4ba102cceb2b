#include "cluster/etcd_config.h"

#include "cluster/helper_protocol.h"

namespace shmipam::cluster {

Expected<EtcdConfig> etcd_config_from_json(const nlohmann::json& j) {
    EtcdConfig c;
    if (!j.is_object() || !j.contains("endpoints") || !j["endpoints"].is_array() ||
        j["endpoints"].empty()) {
        return make_error(Code::kInvalidConfig,
                          "ipam.etcd must be an object with a non-empty \"endpoints\" list "
                          "(docs/cluster.md)");
    }
    for (const auto& e : j["endpoints"]) {
        if (!e.is_string())
            return make_error(Code::kInvalidConfig, "ipam.etcd.endpoints[] must be a URL string");
        c.endpoints.push_back(e.get<std::string>());
    }
    for (const char* f : {"caFile", "certFile", "keyFile", "username", "password"}) {
        if (j.contains(f) && !j[f].is_string()) {
            return make_error(Code::kInvalidConfig,
                              std::string("ipam.etcd.") + f + " must be a string");
        }
    }
    for (const char* f : {"attemptTimeoutMs", "budgetMs"}) {
        if (j.contains(f) && (!j[f].is_number_integer() || j[f].get<int64_t>() < 1)) {
            return make_error(
                Code::kInvalidConfig,
                std::string("ipam.etcd.") + f + " must be a positive integer (milliseconds)");
        }
    }
    c.ca_file = j.value("caFile", "");
    c.cert_file = j.value("certFile", "");
    c.key_file = j.value("keyFile", "");
    c.username = j.value("username", "");
    c.password = j.value("password", "");
    c.attempt_timeout_ms = j.value("attemptTimeoutMs", uint64_t{1000});
    c.budget_ms = j.value("budgetMs", protocol::kDefaultBudgetMs);
    return c;
}

std::string etcd_prefix(const nlohmann::json& etcd) {
    if (etcd.is_object() && etcd.contains("prefix") && etcd["prefix"].is_string()) {
        return etcd["prefix"].get<std::string>();
    }
    return "/shmipam";
}

}  // namespace shmipam::cluster
