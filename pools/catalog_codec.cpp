#include "pools/catalog_codec.h"

#include <algorithm>
#include <cstring>

namespace shmipam::pools {

using engine::Cidr;
using engine::Family;
using engine::IpAddress;
using engine::u128;

namespace {

constexpr char kMagic[8] = {'S', 'H', 'M', 'P', 'C', 'A', 'T', '5'};
// A table record: name (u32 size + at least one byte), family, default, blob size, checksum.
constexpr size_t kTableRecordMinBytes = 4 + 1 + 1 + 1 + 4 + 8;

// A checksum for a cache file (not a defence against an adversary): 8 bytes a step, so that
// checking a snapshot costs a few instructions per word (byte-wise FNV over 16 KiB cost an ADD
// 80,000 instructions at 100 pools).
uint64_t hash64(std::string_view bytes, uint64_t h = 0x9e3779b97f4a7c15ull) {
    size_t i = 0;
    for (; i + 8 <= bytes.size(); i += 8) {
        uint64_t w;
        std::memcpy(&w, bytes.data() + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    for (; i < bytes.size(); ++i) h = (h ^ uint8_t(bytes[i])) * 0x100000001b3ull;
    return h ^ (h >> 32) ^ bytes.size();
}

class Writer {
  public:
    void u8(uint8_t v) { out_.push_back(char(v)); }
    void u32(uint32_t v) { raw(&v, sizeof v); }
    void u64(uint64_t v) { raw(&v, sizeof v); }
    void u128v(u128 v) { raw(&v, sizeof v); }
    void str(const std::string& s) {
        u32(uint32_t(s.size()));
        out_.append(s);
    }
    void labels(const Labels& l) {
        u32(uint32_t(l.size()));
        for (const auto& [k, v] : l) {
            str(k);
            str(v);
        }
    }
    void strings(const std::vector<std::string>& v) {
        u32(uint32_t(v.size()));
        for (const auto& s : v) str(s);
    }
    void addr(const IpAddress& a) {
        u8(uint8_t(a.family));
        u128v(a.value);
    }
    void cidr(const Cidr& c) {
        addr(c.address);
        u8(uint8_t(c.prefix));
    }
    void set(const IpSet& s) {
        u8(uint8_t(s.family()));
        u32(uint32_t(s.intervals().size()));
        for (const Interval& i : s.intervals()) {
            u128v(i.first);
            u128v(i.last);
        }
    }
    void gateway(const std::optional<IpAddress>& g) {
        u8(g ? 1 : 0);
        if (g) addr(*g);
    }
    void routes(const std::vector<Route>& rs) {
        u32(uint32_t(rs.size()));
        for (const auto& r : rs) {
            str(r.dst);
            str(r.gw);
        }
    }
    void selector(const std::optional<LabelSelector>& s) {
        u8(s ? 1 : 0);
        if (!s) return;
        labels(s->match_labels);
        u32(uint32_t(s->expressions.size()));
        for (const auto& e : s->expressions) {
            str(e.key);
            u8(uint8_t(e.op));
            strings(e.values);
        }
    }
    void origin(const Origin& o) {
        str(o.file);
        u64(o.document);
    }
    void address(const AddressSpec& a) {
        str(a.name);
        origin(a.origin);
        cidr(a.subnet);
        set(a.ips);
        set(a.exclude_ips);
        gateway(a.gateway);
        routes(a.routes);
    }
    std::string& bytes() { return out_; }

  private:
    void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
    std::string out_;
};

// Every read is bounds-checked; a short or inconsistent payload sets `bad`.
class Reader {
  public:
    explicit Reader(std::string_view in) : in_(in) {}
    bool bad = false;

    uint8_t u8() {
        uint8_t v = 0;
        raw(&v, 1);
        return v;
    }
    uint32_t u32() {
        uint32_t v = 0;
        raw(&v, sizeof v);
        return v;
    }
    uint64_t u64() {
        uint64_t v = 0;
        raw(&v, sizeof v);
        return v;
    }
    u128 u128v() {
        u128 v = 0;
        raw(&v, sizeof v);
        return v;
    }
    // A count of items each at least `min_bytes` long: more than the rest can hold is corrupt.
    uint32_t count(size_t min_bytes) {
        const uint32_t n = u32();
        if (min_bytes * n > in_.size() - at_) bad = true;
        return bad ? 0 : n;
    }
    std::string str() {
        const uint32_t n = count(1);
        if (bad) return {};
        std::string s(in_.substr(at_, n));
        at_ += n;
        return s;
    }
    Labels labels() {
        Labels l;
        for (uint32_t i = 0, n = count(8); i < n && !bad; ++i) {
            std::string k = str();
            l[std::move(k)] = str();
        }
        return l;
    }
    std::vector<std::string> strings() {
        std::vector<std::string> v;
        for (uint32_t i = 0, n = count(4); i < n && !bad; ++i) v.push_back(str());
        return v;
    }
    Family family() {
        const uint8_t f = u8();
        if (f != 4 && f != 6) bad = true;
        return f == 6 ? Family::kV6 : Family::kV4;
    }
    IpAddress addr() {
        IpAddress a;
        a.family = family();
        a.value = u128v();
        return a;
    }
    Cidr cidr() {
        Cidr c;
        c.address = addr();
        c.prefix = u8();
        return c;
    }
    IpSet set() {
        IpSet s(family());
        for (uint32_t i = 0, n = count(32); i < n && !bad; ++i) {
            const u128 first = u128v();
            const u128 last = u128v();
            s.add(first, last);
        }
        return s;
    }
    std::optional<IpAddress> gateway() {
        if (u8() == 0) return std::nullopt;
        return addr();
    }
    std::vector<Route> routes() {
        std::vector<Route> rs;
        for (uint32_t i = 0, n = count(8); i < n && !bad; ++i) {
            Route r;
            r.dst = str();
            r.gw = str();
            rs.push_back(std::move(r));
        }
        return rs;
    }
    std::optional<LabelSelector> selector() {
        if (u8() == 0) return std::nullopt;
        LabelSelector s;
        s.match_labels = labels();
        for (uint32_t i = 0, n = count(9); i < n && !bad; ++i) {
            LabelRequirement r;
            r.key = str();
            const uint8_t op = u8();
            if (op > uint8_t(LabelRequirement::Op::kDoesNotExist)) bad = true;
            r.op = LabelRequirement::Op(op);
            r.values = strings();
            s.expressions.push_back(std::move(r));
        }
        return s;
    }
    Origin origin() {
        Origin o;
        o.file = str();
        o.document = u64();
        return o;
    }
    void address(AddressSpec& a) {
        a.name = str();
        a.origin = origin();
        a.subnet = cidr();
        a.family = a.subnet.address.family;
        a.ips = set();
        a.exclude_ips = set();
        a.gateway = gateway();
        a.routes = routes();
    }
    bool done() const { return at_ == in_.size(); }
    size_t position() const { return at_; }
    // The next n bytes, without copying.
    std::string_view view(size_t n) {
        if (bad || in_.size() - at_ < n) {
            bad = true;
            return {};
        }
        std::string_view v = in_.substr(at_, n);
        at_ += n;
        return v;
    }

  private:
    void raw(void* p, size_t n) {
        if (bad || in_.size() - at_ < n) {
            bad = true;
            return;
        }
        std::memcpy(p, in_.data() + at_, n);
        at_ += n;
    }
    std::string_view in_;
    size_t at_ = 0;
};

void encode_pool(Writer& w, const IpPool& p) {
    w.address(p);
    w.u8(p.terminating);
    w.u8(p.is_default);
    w.u8(p.disabled);
    w.strings(p.node_name);
    w.selector(p.node_affinity);
    w.strings(p.namespace_name);
    w.selector(p.namespace_affinity);
    w.selector(p.pod_affinity);
    w.strings(p.multus_name);
}

}  // namespace

std::optional<IpPool> decode_pool(std::string_view blob, uint64_t checksum) {
    if (hash64(blob) != checksum) return std::nullopt;
    Reader r(blob);
    IpPool p;
    r.address(p);
    p.terminating = r.u8();
    p.is_default = r.u8();
    p.disabled = r.u8();
    p.node_name = r.strings();
    p.node_affinity = r.selector();
    p.namespace_name = r.strings();
    p.namespace_affinity = r.selector();
    p.pod_affinity = r.selector();
    p.multus_name = r.strings();
    if (r.bad || !r.done()) return std::nullopt;
    return p;
}

std::string encode_catalog(const Catalog& c) {
    Writer w;
    const std::vector<IpPool>& all = c.pools();
    std::vector<std::string> blobs;
    for (const IpPool& p : all) {
        Writer b;
        encode_pool(b, p);
        blobs.push_back(std::move(b.bytes()));
    }
    Writer table;
    uint64_t blobs_bytes = 0;
    for (size_t i = 0; i < all.size(); ++i) {
        table.str(all[i].name);
        table.u8(uint8_t(all[i].family));
        table.u8(all[i].is_default);
        table.u32(uint32_t(blobs[i].size()));
        table.u64(hash64(blobs[i]));
        blobs_bytes += blobs[i].size();
    }
    w.u32(uint32_t(all.size()));
    w.u32(uint32_t(table.bytes().size()));
    w.u64(blobs_bytes);
    w.bytes() += table.bytes();
    const size_t blobs_start = w.bytes().size();
    for (const auto& b : blobs) w.bytes() += b;
    const size_t blobs_end = w.bytes().size();
    w.u32(uint32_t(c.subnets_.size()));
    for (const Subnet& s : c.subnets_) w.address(s);
    w.u32(uint32_t(c.reserved_.size()));
    for (const ReservedIp& r : c.reserved_) {
        w.str(r.name);
        w.origin(r.origin);
        w.set(r.ips);
    }
    w.u32(uint32_t(c.namespaces_.size()));
    for (const auto& [name, ns] : c.namespaces_) {
        w.str(name);
        w.labels(ns.labels);
        w.labels(ns.annotations);
    }
    w.u32(uint32_t(c.nodes_.size()));
    for (const auto& [name, node] : c.nodes_) {
        w.str(name);
        w.labels(node.labels);
    }
    w.u32(uint32_t(c.problems_.size()));
    for (const Problem& p : c.problems_) {
        w.str(p.file);
        w.str(p.message);
    }
    w.labels(c.withdrawn_);

    std::string out(kMagic, sizeof kMagic);
    const std::string& payload = w.bytes();
    // The header's checksum covers everything but the pools' blobs, which carry their own (each
    // is checked when it is decoded: a call reads only the pools it asks for).
    const std::string_view view = payload;
    const uint64_t size = payload.size(),
                   sum = hash64(view.substr(blobs_end), hash64(view.substr(0, blobs_start)));
    out.append(reinterpret_cast<const char*>(&size), sizeof size);
    out.append(reinterpret_cast<const char*>(&sum), sizeof sum);
    out += payload;
    return out;
}

void for_each_pool_record(std::string_view table, std::string_view blobs, uint32_t count,
                          base::FunctionRef<bool(const PoolRecord&)> visit) {
    Reader r(table);
    size_t blob_at = 0;
    for (uint32_t i = 0; i < count && !r.bad; ++i) {
        PoolRecord rec;
        rec.name = r.view(r.u32());
        rec.family = r.family();
        rec.is_default = r.u8() != 0;
        const uint32_t blob_size = r.u32();
        rec.checksum = r.u64();
        // A record out of bounds (a table the checksum let through) ends the walk.
        if (r.bad || blob_size > blobs.size() - blob_at) return;
        rec.blob = blobs.substr(blob_at, blob_size);
        blob_at += blob_size;
        if (!visit(rec)) return;
    }
}

std::optional<Catalog> decode_catalog(std::string_view bytes, std::shared_ptr<const void> backing) {
    if (bytes.size() < 24 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
        return std::nullopt;
    }
    uint64_t size = 0, sum = 0;
    std::memcpy(&size, bytes.data() + 8, 8);
    std::memcpy(&sum, bytes.data() + 16, 8);
    const std::string_view payload = bytes.substr(24);
    if (payload.size() != size) return std::nullopt;
    Reader r(payload);
    Catalog c;
    c.backing_ = std::move(backing);
    c.all_decoded_ = false;
    c.summarized_ = false;
    // The pools' table and blobs are kept as they are in the snapshot, not walked: a call reads
    // only the records it needs (for_each_pool_record checks each record's bounds), and nothing
    // of them lands on the heap. The checksum below covers the table.
    const uint32_t pool_count = r.u32();
    const uint32_t table_bytes = r.u32();
    const uint64_t blobs_bytes = r.u64();
    if (uint64_t(pool_count) * kTableRecordMinBytes > table_bytes) r.bad = true;
    const std::string_view table = r.view(table_bytes);
    const size_t blobs_start = r.position();
    const std::string_view blobs = r.view(size_t(std::min<uint64_t>(blobs_bytes, payload.size())));
    if (blobs.size() != blobs_bytes) r.bad = true;
    const size_t blobs_end = r.position();
    if (r.bad || hash64(payload.substr(blobs_end), hash64(payload.substr(0, blobs_start))) != sum) {
        return std::nullopt;
    }
    c.table_ = table;
    c.table_count_ = pool_count;
    c.blobs_ = blobs;
    for (uint32_t i = 0, n = r.count(16); i < n && !r.bad; ++i) {
        Subnet s;
        r.address(s);
        c.subnets_.push_back(std::move(s));
    }
    for (uint32_t i = 0, n = r.count(16); i < n && !r.bad; ++i) {
        ReservedIp res;
        res.name = r.str();
        res.origin = r.origin();
        res.ips = r.set();
        res.family = res.ips.family();
        c.reserved_.push_back(std::move(res));
    }
    for (uint32_t i = 0, n = r.count(12); i < n && !r.bad; ++i) {
        NamespaceObject ns;
        ns.name = r.str();
        ns.labels = r.labels();
        ns.annotations = r.labels();
        c.namespaces_[ns.name] = std::move(ns);
    }
    for (uint32_t i = 0, n = r.count(8); i < n && !r.bad; ++i) {
        NodeObject node;
        node.name = r.str();
        node.labels = r.labels();
        c.nodes_[node.name] = std::move(node);
    }
    for (uint32_t i = 0, n = r.count(8); i < n && !r.bad; ++i) {
        Problem p;
        p.file = r.str();
        p.message = r.str();
        c.problems_.push_back(std::move(p));
    }
    c.withdrawn_ = r.labels();
    if (r.bad || !r.done()) return std::nullopt;
    return c;
}

}  // namespace shmipam::pools
