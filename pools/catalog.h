// Every object of a pools directory, checked as a set: each pool, subnet and reserved-IP object
// that decoded, the Namespaces and Nodes, and the problems found (a malformed object, two pools
// of one family whose addresses overlap, a name used twice). A problem takes the objects it
// names out of service and nothing else: the other pools keep serving.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pools/object_decode.h"
#include "pools/objects.h"

namespace shmipam::pools {

// What the rules need to know of every pool without decoding it: its name, family and whether
// it is a cluster default (a snapshot-backed catalog decodes a pool only when it is asked for).
struct PoolSummary {
    std::string_view name;  // valid while the catalog lives
    engine::Family family = engine::Family::kV4;
    bool is_default = false;
};

struct Problem {
    std::string file;
    std::string message;
};

class Catalog {
  public:
    // Adds an object as decoded, or a decoding error, from `file`.
    void add(DecodedObject object);
    void add_problem(const std::string& file, const std::string& message);
    // Checks the set (names used twice, overlapping pools) and orders pools by name. Call once,
    // after the last add.
    void finish();

    // Every pool by name, decoded (a snapshot-backed catalog decodes them all on the first call:
    // for the rare paths; the selection uses pool_summaries() and pool()). Not thread-safe.
    const std::vector<IpPool>& pools() const;
    const std::vector<PoolSummary>& pool_summaries() const;
    const std::vector<Subnet>& subnets() const { return subnets_; }
    const std::vector<Problem>& problems() const { return problems_; }

    const IpPool* pool(const std::string& name) const;
    const Subnet* subnet(const std::string& name) const;
    const NamespaceObject* namespace_(const std::string& name) const;
    const NodeObject* node(const std::string& name) const;
    // Why a named pool or subnet was taken out of service, when it was ("" otherwise).
    std::string withdrawn(const std::string& name) const;
    // Marks a name as out of service (an object by that name did not decode).
    void withdraw(const std::string& name, const std::string& why) { withdrawn_[name] = why; }

    // Every reserved address of a family, from all SpiderReservedIP objects.
    IpSet reserved_ips(engine::Family family) const;

  private:
    friend std::string encode_catalog(const Catalog& catalog);
    friend std::optional<Catalog> decode_catalog(std::string_view bytes,
                                                 std::shared_ptr<const void> backing);
    void summarize();

    mutable std::vector<IpPool> pools_;
    mutable std::vector<PoolSummary> summaries_;
    // Snapshot-backed: the pools' table and blobs as they are in the snapshot (catalog_codec.h),
    // read on demand: summaries_ is built from the table when first asked for.
    std::shared_ptr<const void> backing_;  // keeps the bytes the views point into
    std::string_view table_, blobs_;
    uint32_t table_count_ = 0;
    mutable bool summarized_ = true;
    mutable std::map<std::string, IpPool, std::less<>> decoded_;
    mutable bool all_decoded_ = true;
    std::vector<Subnet> subnets_;
    std::vector<ReservedIp> reserved_;
    std::map<std::string, NamespaceObject> namespaces_;
    std::map<std::string, NodeObject> nodes_;
    std::vector<Problem> problems_;
    mutable std::map<std::string, std::string> withdrawn_;  // mutable: a damaged blob, found late
};

}  // namespace shmipam::pools
