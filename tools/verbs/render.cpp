// shmipamctl render: an SVG map of a network's addresses; with --cidr, the blocks of the range
// that nobody needed yet are drawn too (all free), so the map shows the whole range.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <set>

#include "engine/inspect/inspect.h"
#include "tools/render/svg.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

// Adds a free BlockView for every block of `c` the dump lacks (at most 4096 blocks in all).
void add_unused_blocks(const engine::Cidr& c, int prefix, engine::NetworkDump& d) {
    const engine::u128 step = engine::u128{1} << (c.address.bits() - prefix);
    std::set<std::string> have;
    for (const auto& b : d.blocks) have.insert(b.cidr);
    for (engine::u128 v = c.network().value; v <= c.last().value && d.blocks.size() < 4096;
         v += step) {
        const std::string cidr =
            engine::IpAddress{v, c.address.family}.to_string() + "/" + std::to_string(prefix);
        if (!have.count(cidr)) {
            engine::BlockView bv;
            bv.cidr = cidr;
            bv.slots = uint64_t(step);
            d.blocks.push_back(bv);
        }
        if (c.last().value - v < step) break;
    }
    std::sort(d.blocks.begin(), d.blocks.end(), [](const auto& x, const auto& y) {
        auto a = engine::Cidr::parse(x.cidr), b = engine::Cidr::parse(y.cidr);
        return a->address < b->address;
    });
}

struct RenderOptions {
    std::string cidr;  // the network's whole range, or empty for the blocks it has
};

int cmd_render(const CommonOptions& common, const RenderOptions& o) {
    auto store = open_network(common.run_dir, common.network, shm::Access::kReadOnly);
    if (!store) return cannot_read(store.error());
    auto d = engine::dump(**store);
    if (!d) return cannot_read(d.error());
    if (!o.cidr.empty()) {
        auto c = engine::Cidr::parse(o.cidr);
        if (!c || c->has_host_bits()) {
            return cannot_read("--cidr wants a network address, not \"" + o.cidr + "\"");
        }
        const int prefix = std::max<int>(c->prefix, (*store)->block_prefix(c->address.family));
        add_unused_blocks(*c, prefix, *d);
    }
    std::cout << render_svg(*d);
    return kExitClean;
}

}  // namespace

void register_render(CLI::App& app, CommonOptions& common, int& exit_code) {
    auto* verb = app.add_subcommand("render", "an SVG map of the network's addresses");
    add_network_argument(*verb, common);
    auto o = std::make_shared<RenderOptions>();
    verb->add_option("--cidr", o->cidr,
                     "the network's range: blocks not created yet are drawn free");
    verb->callback([&common, o, &exit_code] { exit_code = cmd_render(common, *o); });
}

}  // namespace shmipam::tools
