#include "cluster/helper_protocol.h"

#include <type_traits>

namespace shmipam::cluster::protocol {

using nlohmann::json;
namespace envelope = base::envelope;

namespace {

// The op of each request struct, as written on the wire.
constexpr const char* op_name(const ClaimBlock&) {
    return "claim-block";
}
constexpr const char* op_name(const Refresh&) {
    return "refresh";
}
constexpr const char* op_name(const TakeFixed&) {
    return "take-fixed";
}
constexpr const char* op_name(const GiveUpFixed&) {
    return "give-up-fixed";
}
constexpr const char* op_name(const GiveUpUnheld&) {
    return "give-up-unheld";
}
constexpr const char* op_name(const ReadFixed&) {
    return "read-fixed";
}
constexpr const char* op_name(const ReleaseBlock&) {
    return "release-block";
}

std::string range_text(const AddressRange& r) {
    return r.first.to_string() + "-" + r.last.to_string();
}

void put_scope(json& j, const Scope& s) {
    j["etcd"] = s.etcd;
    j["pool"] = s.pool;
    j["node"] = s.node;
    j["stateDir"] = s.state_dir;
}

json ranges_json(const std::vector<AddressRange>& ranges) {
    json out = json::array();
    for (const auto& r : ranges) out.push_back(range_text(r));
    return out;
}

void put_geometry(json& j, const BlockGeometry& g) {
    j["cidr"] = engine::Cidr{g.pool_cidr.network(), g.pool_cidr.prefix}.to_string();
    j["blockPrefix"] = g.block_prefix;
    j["usable"] = ranges_json(g.usable);
    json seen = json::array();
    for (const auto& c : g.seen) seen.push_back(c.to_string());
    j["seen"] = seen;
}

// The envelope's readers of one request's fields, and this protocol's own kinds of field; each
// answers code 7 naming the field.
struct Reader : envelope::FieldReader {
    Reader(const json& object, const std::string& op)
        : FieldReader(kProtocol, object, op + " request"), j(object) {}

    const json& j;

    Expected<uint64_t> number(const char* f, std::optional<uint64_t> fallback) const {
        return count(f, fallback);
    }
    Expected<engine::Cidr> cidr(const char* f) const {
        auto t = text(f);
        if (!t) return t.error();
        auto c = engine::Cidr::parse(*t);
        if (!c) return field_error(f, "a CIDR");
        return *c;
    }
    Expected<std::vector<AddressRange>> ranges(const char* f) const {
        std::vector<AddressRange> out;
        auto it = j.find(f);
        if (it == j.end() || it->is_null()) return out;
        if (!it->is_array()) return field_error(f, "a list of \"first-last\" ranges");
        for (const auto& r : *it) {
            if (!r.is_string()) return field_error(f, "a list of \"first-last\" ranges");
            const std::string s = r.get<std::string>();
            const size_t dash = s.find('-');
            auto first = engine::IpAddress::parse(s.substr(0, dash));
            auto last =
                dash == std::string::npos ? first : engine::IpAddress::parse(s.substr(dash + 1));
            if (!first || !last || first->family != last->family) {
                return field_error(f, "a list of \"first-last\" ranges");
            }
            out.push_back({*first, *last});
        }
        return out;
    }
    Expected<Scope> scope() const {
        Scope s;
        auto e = j.find("etcd");
        if (e == j.end() || !e->is_object()) return field_error("etcd", "ipam.etcd's object");
        s.etcd = *e;
        auto pool = text("pool");
        auto node = text("node");
        auto dir = text("stateDir");
        if (!pool) return pool.error();
        if (!node) return node.error();
        if (!dir) return dir.error();
        if (pool->empty() || node->empty() || dir->empty()) {
            return field_error("pool, node and stateDir", "each not empty");
        }
        s.pool = *pool;
        s.node = *node;
        s.state_dir = *dir;
        return s;
    }
    Expected<BlockGeometry> geometry() const {
        BlockGeometry g;
        auto c = cidr("cidr");
        if (!c) return c.error();
        auto p = number("blockPrefix", std::nullopt);
        if (!p) return p.error();
        if (*p < uint64_t(c->prefix) || *p > uint64_t(c->address.bits())) {
            return field_error("blockPrefix", "a prefix length within the pool's CIDR");
        }
        auto u = ranges("usable");
        if (!u) return u.error();
        g.pool_cidr = *c;
        g.block_prefix = int(*p);
        g.usable = std::move(*u);
        if (auto s = j.find("seen"); s != j.end() && !s->is_null()) {
            if (!s->is_array()) return field_error("seen", "a list of block CIDRs");
            for (const auto& b : *s) {
                auto bc = b.is_string() ? engine::Cidr::parse(b.get<std::string>()) : std::nullopt;
                if (!bc) return field_error("seen", "a list of block CIDRs");
                g.seen.push_back(*bc);
            }
        }
        return g;
    }
};

// A string field, or "" when it is absent or of another type (never a throw: a malformed answer
// is refused by what needs the field, not by an exception).
std::string text_of(const json& j, const char* field) {
    const auto it = j.find(field);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Expected<json> answer_object(std::string_view text) {
    return envelope::answer_object(kProtocol, text);
}

Error unreadable_answer(const json& a) {
    return make_error(Code::kInternal, "the cluster helper's answer lacks what its op answers",
                      a.dump());
}

std::optional<engine::Cidr> optional_cidr(const json& a, const char* f) {
    auto it = a.find(f);
    if (it == a.end() || !it->is_string()) return std::nullopt;
    return engine::Cidr::parse(it->get<std::string>());
}

}  // namespace

std::string encode(const Request& r) {
    json j = envelope::request_head(
        kProtocol, std::visit([](const auto& op) { return std::string_view(op_name(op)); }, r));
    if (const auto* c = std::get_if<ClaimBlock>(&r)) {
        put_scope(j, c->scope);
        put_geometry(j, c->geometry);
        j["maxBlocks"] = c->max_blocks;
        if (c->address) j["address"] = c->address->to_string();
        j["ahead"] = c->ahead;
        j["lockHandedOver"] = c->lock_handed_over;
    } else if (const auto* f = std::get_if<Refresh>(&r)) {
        put_scope(j, f->scope);
        put_geometry(j, f->geometry);
        j["lockHandedOver"] = f->lock_handed_over;
    } else if (const auto* t = std::get_if<TakeFixed>(&r)) {
        put_scope(j, t->scope);
        j["usable"] = ranges_json(t->usable);
        j["claimKey"] = t->claim_key;
        j["lockHandedOver"] = t->lock_handed_over;
        if (t->address) j["address"] = t->address->to_string();
        j["poolState"] = t->pool_state;
        j["ifname"] = t->ifname;
        j["cidr"] = t->pool_cidr.to_string();
        j["keepIdle"] = t->keep_idle;
    } else if (const auto* g = std::get_if<GiveUpFixed>(&r)) {
        put_scope(j, g->scope);
        j["claimKey"] = g->claim_key;
        j["poolState"] = g->pool_state;
        j["ifname"] = g->ifname;
    } else if (const auto* u = std::get_if<GiveUpUnheld>(&r)) {
        put_scope(j, u->scope);
        j["poolState"] = u->pool_state;
    } else if (const auto* f = std::get_if<ReadFixed>(&r)) {
        put_scope(j, f->scope);
        j["claimKey"] = f->claim_key;
    } else if (const auto* b = std::get_if<ReleaseBlock>(&r)) {
        put_scope(j, b->scope);
        j["block"] = b->block.to_string();
        j["poolState"] = b->pool_state;
        j["minAgeS"] = b->min_age_s;
        if (b->even_last) j["evenLast"] = true;
    }
    return j.dump();
}

Expected<Request> decode(std::string_view text) {
    auto received = envelope::receive(kProtocol, text);
    if (!received) return received.error();
    const std::string& op = received->op;
    const Reader in{received->body, op};
    auto scope = in.scope();
    if (op == op_name(ClaimBlock{})) {
        if (!scope) return scope.error();
        ClaimBlock c;
        c.scope = std::move(*scope);
        auto g = in.geometry();
        auto max = in.number("maxBlocks", 32);
        auto ahead = in.flag("ahead");
        auto handed = in.flag("lockHandedOver");
        auto address = in.text("address", false);
        if (!g) return g.error();
        if (!max) return max.error();
        if (!ahead) return ahead.error();
        if (!handed) return handed.error();
        if (!address) return address.error();
        if (!address->empty()) {
            c.address = engine::IpAddress::parse(*address);
            if (!c.address) {
                return make_error(Code::kRequestedAddressInvalid, "not an address: " + *address);
            }
        }
        c.geometry = std::move(*g);
        c.max_blocks = *max;
        c.ahead = *ahead;
        c.lock_handed_over = *handed;
        return Request{std::move(c)};
    }
    if (op == op_name(Refresh{})) {
        if (!scope) return scope.error();
        auto g = in.geometry();
        auto handed = in.flag("lockHandedOver");
        if (!g) return g.error();
        if (!handed) return handed.error();
        return Request{Refresh{std::move(*scope), std::move(*g), *handed}};
    }
    if (op == op_name(TakeFixed{})) {
        if (!scope) return scope.error();
        auto usable = in.ranges("usable");
        auto key = in.text("claimKey");
        auto handed = in.flag("lockHandedOver");
        auto address = in.text("address", false);
        if (!usable) return usable.error();
        if (!key) return key.error();
        if (!handed) return handed.error();
        if (!address) return address.error();
        auto state = in.text("poolState", false);
        auto ifname = in.text("ifname", false);
        if (!state) return state.error();
        if (!ifname) return ifname.error();
        auto cidr = in.text("cidr");
        auto keep_idle = in.number("keepIdle", std::nullopt);
        if (!cidr) return cidr.error();
        if (!keep_idle) return keep_idle.error();
        TakeFixed t{std::move(*scope), std::move(*usable), *key, *handed};
        t.pool_state = *state;
        t.ifname = *ifname;
        t.keep_idle = *keep_idle;
        auto pool_cidr = engine::Cidr::parse(*cidr);
        if (!pool_cidr) return make_error(Code::kInvalidConfig, "not a CIDR: cidr " + *cidr);
        t.pool_cidr = *pool_cidr;
        if (!address->empty()) {
            t.address = engine::IpAddress::parse(*address);
            if (!t.address) {
                return make_error(Code::kRequestedAddressInvalid, "not an address: " + *address);
            }
        }
        return Request{std::move(t)};
    }
    if (op == op_name(GiveUpFixed{})) {
        if (!scope) return scope.error();
        auto key = in.text("claimKey");
        auto state = in.text("poolState", false);
        auto ifname = in.text("ifname", false);
        if (!key) return key.error();
        if (!state) return state.error();
        if (!ifname) return ifname.error();
        return Request{GiveUpFixed{std::move(*scope), *key, *state, *ifname}};
    }
    if (op == op_name(GiveUpUnheld{})) {
        if (!scope) return scope.error();
        auto state = in.text("poolState");
        if (!state) return state.error();
        return Request{GiveUpUnheld{std::move(*scope), *state}};
    }
    if (op == op_name(ReadFixed{})) {
        if (!scope) return scope.error();
        auto key = in.text("claimKey");
        if (!key) return key.error();
        return Request{ReadFixed{std::move(*scope), *key}};
    }
    if (op == op_name(ReleaseBlock{})) {
        if (!scope) return scope.error();
        auto block = in.cidr("block");
        auto state = in.text("poolState");
        auto age = in.number("minAgeS", 300);
        auto even_last = in.flag("evenLast");
        if (!block) return block.error();
        if (!state) return state.error();
        if (!age) return age.error();
        if (!even_last) return even_last.error();
        return Request{ReleaseBlock{std::move(*scope), *block, *state, *age, *even_last}};
    }
    return envelope::unknown_op(kProtocol, op);
}

json to_json(const BlockAnswer& a) {
    json blocks = json::array();
    for (const auto& b : a.blocks) blocks.push_back(b.to_string());
    return {{"claimed", a.claimed ? json(a.claimed->to_string()) : json(nullptr)},
            {"atCap", a.at_cap},
            {"blocks", blocks},
            {"waitingFor", a.waiting_for},
            {"holders", a.holders}};
}

json to_json(const FixedAnswer& a) {
    return {{"address", a.address.to_string()}, {"movedFrom", a.moved_from}};
}

json to_json(const GiveUpAnswer& a) {
    return {{"released", a.released}};
}

json to_json(const FixedOwnerAnswer& a) {
    return {{"node", a.node},
            {"address", a.address ? json(a.address->to_string()) : json(nullptr)}};
}

json to_json(const ReleaseAnswer& a) {
    return {{"released", a.released ? json(a.released->to_string()) : json(nullptr)},
            {"why", a.why}};
}

Expected<BlockAnswer> block_answer(std::string_view text) {
    auto a = answer_object(text);
    if (!a) return a.error();
    BlockAnswer out;
    out.claimed = optional_cidr(*a, "claimed");
    out.at_cap = a->contains("atCap") && (*a)["atCap"].is_boolean() && (*a)["atCap"].get<bool>();
    for (const char* f : {"waitingFor", "holders"}) {
        auto list = a->find(f);
        if (list == a->end() || !list->is_array()) continue;
        for (const auto& n : *list) {
            if (!n.is_string()) return unreadable_answer(*a);
            (std::string(f) == "holders" ? out.holders : out.waiting_for).push_back(n);
        }
    }
    if (auto b = a->find("blocks"); b != a->end() && b->is_array()) {
        for (const auto& c : *b) {
            auto cidr = c.is_string() ? engine::Cidr::parse(c.get<std::string>()) : std::nullopt;
            if (!cidr) return unreadable_answer(*a);
            out.blocks.push_back(*cidr);
        }
    }
    return out;
}

Expected<FixedAnswer> fixed_answer(std::string_view text) {
    auto a = answer_object(text);
    if (!a) return a.error();
    auto address = engine::IpAddress::parse(text_of(*a, "address"));
    if (!address) {
        return make_error(Code::kInternal, "the cluster helper answered no address", a->dump());
    }
    return FixedAnswer{*address, text_of(*a, "movedFrom")};
}

Expected<GiveUpAnswer> give_up_answer(std::string_view text) {
    auto a = answer_object(text);
    if (!a) return a.error();
    if (!a->contains("released") || !(*a)["released"].is_boolean()) return unreadable_answer(*a);
    return GiveUpAnswer{(*a)["released"].get<bool>()};
}

Expected<FixedOwnerAnswer> fixed_owner_answer(std::string_view text) {
    auto a = answer_object(text);
    if (!a) return a.error();
    if (!a->contains("node") || !(*a)["node"].is_string()) return unreadable_answer(*a);
    FixedOwnerAnswer out{(*a)["node"].get<std::string>(), std::nullopt};
    if (auto it = a->find("address"); it != a->end() && it->is_string()) {
        out.address = engine::IpAddress::parse(it->get<std::string>());
    }
    return out;
}

}  // namespace shmipam::cluster::protocol
