#include "cluster/store_schema.h"

#include <nlohmann/json.hpp>

#include "cluster/key_schema.h"

namespace shmipam::cluster {

using nlohmann::json;

namespace {

// The record's version: nullopt when the record does not parse.
std::optional<int> version_of(const KeyValue& kv) {
    const json v = json::parse(kv.value, nullptr, false);
    const auto it = v.is_object() ? v.find("version") : v.end();
    if (!v.is_object() || it == v.end() || !it->is_number_integer()) return std::nullopt;
    return it->get<int>();
}

json schema_value() {
    return json{{"version", keys::kSchemaVersion}};
}

}  // namespace

Status ensure_schema(KvStore& kv, const std::string& prefix, bool stamp) {
    auto record = kv.get(keys::schema(prefix));
    if (!record) return record.error();
    return ensure_schema(kv, prefix, *record, stamp);
}

Status ensure_schema(KvStore& kv, const std::string& prefix, const std::optional<KeyValue>& record,
                     bool stamp) {
    if (record) {
        const std::optional<int> v = version_of(*record);
        if (v && *v == keys::kSchemaVersion) return Ok{};
        if (!v) {
            return make_error(Code::kInvalidConfig,
                              "the cluster store's schema record " + keys::schema(prefix) +
                                  " holds " + record->value +
                                  ", not {\"version\": N}: it was written by hand or damaged; "
                                  "put back {\"version\": 2} if the store holds this layout");
        }
        return make_error(Code::kInvalidConfig,
                          "the cluster store under " + prefix + " holds schema version " +
                              std::to_string(*v) + " and this release reads version " +
                              std::to_string(keys::kSchemaVersion) +
                              ": upgrade shmipam on this node (a newer release wrote it)");
    }
    auto v1 = kv.any_under(keys::v1_pools(prefix));
    if (!v1) return v1.error();
    if (*v1) {
        return make_error(
            Code::kInvalidConfig,
            "the cluster store under " + prefix +
                " holds the v1 layout of an earlier release: run `shmipamctl cluster migrate "
                "--config <this network's config> --apply` once every node runs this release "
                "(docs/cluster.md, \"Migrating the store\"); nothing is claimed until then");
    }
    if (!stamp) return Ok{};
    // An empty store: this layout from the start. Another writer stamping it at once writes the
    // same record.
    auto made = kv.create_if_absent(keys::schema(prefix), schema_value().dump());
    if (!made) return made.error();
    if (made->created || !made->held) return Ok{};
    if (version_of(*made->held) == keys::kSchemaVersion) return Ok{};
    return make_error(Code::kInvalidConfig, "the cluster store's schema record changed to " +
                                                made->held->value + " while being written");
}

}  // namespace shmipam::cluster
