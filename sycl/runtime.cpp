#include "runtime.hpp"

#include "kernel_store.hpp"

#include <algorithm>
#include <optional>

namespace gnnsparse::sycl_rt {
namespace syclex = sycl::ext::oneapi::experimental;

namespace {
// Kernels follow IEEE semantics: NaN tests in max/min and softmax must not be folded away, and
// results must not depend on the compiler's reassociation (the SYCL default is fast math).
const std::vector<std::string> kBuildOptions = {"-fno-fast-math", "-ffp-contract=on"};

std::string entry_source(const std::string &entry) { return "#include \"" + entry + "\"\n"; }

syclex::include_files all_includes() {
  syclex::include_files inc;
  for (const auto &[path, text] : kernel_sources()) inc.add(path, text);
  return inc;
}

void check_entry(const std::string &entry) {
  const auto &src = kernel_sources();
  if (std::none_of(src.begin(), src.end(), [&](const auto &p) { return p.first == entry; }))
    throw std::invalid_argument("no embedded kernel source named '" + entry + "'");
}

}  // namespace

sycl::kernel_bundle<sycl::bundle_state::executable> build_source_bundle(const sycl::context &ctx,
                                                                        const sycl::device &dev,
                                                                        const std::string &entry,
                                                                        const std::string &name) {
  std::string log;
  try {
    auto src = syclex::create_kernel_bundle_from_source(ctx, syclex::source_language::sycl, entry_source(entry),
                                                        syclex::properties{all_includes()});
    return syclex::build(src, std::vector<sycl::device>{dev},
                         syclex::properties{syclex::build_options{kBuildOptions}, syclex::save_log{&log},
                                            syclex::registered_names{std::vector<std::string>{name}}});
  } catch (sycl::exception &e) {
    throw CompileError("building SYCL kernel " + name + " from " + entry + " failed: " + e.what() +
                       (log.empty() ? std::string() : "\ncompiler log:\n" + log));
  }
}

KernelCache &KernelCache::instance() {
  static KernelCache *cache = new KernelCache();  // never destroyed: kernels outlive static teardown order
  return *cache;
}

size_t KernelCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto &t : tables_) n += t->by_key.size() + t->by_name.size();
  return n;
}

KernelCache::DeviceKernels &KernelCache::table(const sycl::context &ctx, const sycl::device &dev) {
  if (last_ && last_->dev == dev && last_->ctx == ctx) return *last_;
  for (auto &t : tables_)
    if (t->dev == dev && t->ctx == ctx) return *(last_ = t.get());
  tables_.push_back(std::make_unique<DeviceKernels>(DeviceKernels{ctx, dev, {}, {}}));
  return *(last_ = tables_.back().get());
}

sycl::kernel KernelCache::get(const sycl::queue &q, Instance in) {
  const sycl::context ctx = q.get_context();
  const sycl::device dev = q.get_device();
  const std::uint64_t key = in.key();
  std::promise<sycl::kernel> built;
  std::shared_future<sycl::kernel> other;  // another thread's build of the same instance
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto &t = table(ctx, dev);
    auto it = t.by_key.find(key);
    if (it != t.by_key.end()) return it->second;
    auto p = t.pending.find(key);
    if (p != t.pending.end())
      other = p->second;
    else
      t.pending.emplace(key, built.get_future().share());
  }
  if (other.valid()) return other.get();  // its kernel, or its exception
  try {
    sycl::kernel k = load_kernel(ctx, dev, in).kernel;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto &t = table(ctx, dev);
      t.by_key.emplace(key, k);
      t.pending.erase(key);
    }
    built.set_value(k);
    return k;
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      table(ctx, dev).pending.erase(key);
    }
    built.set_exception(std::current_exception());
    throw;
  }
}

sycl::kernel KernelCache::get(const sycl::queue &q, const std::string &entry, const std::string &name) {
  const sycl::context ctx = q.get_context();
  const sycl::device dev = q.get_device();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto &t = table(ctx, dev);
    auto it = t.by_name.find(entry + '\n' + name);
    if (it != t.by_name.end()) return it->second;
  }
  check_entry(entry);
  sycl::kernel k = build_source_bundle(ctx, dev, entry, name).ext_oneapi_get_kernel(name);
  std::lock_guard<std::mutex> lock(mu_);
  return table(ctx, dev).by_name.emplace(entry + '\n' + name, k).first->second;
}

std::string KernelCache::compile_only(const sycl::queue &q, const std::string &entry,
                                      const std::vector<std::string> &names) {
  check_entry(entry);
  std::string log;
  try {
    auto src = syclex::create_kernel_bundle_from_source(q.get_context(), syclex::source_language::sycl,
                                                        entry_source(entry), syclex::properties{all_includes()});
    auto obj = syclex::compile(src, std::vector<sycl::device>{q.get_device()},
                               syclex::properties{syclex::build_options{kBuildOptions}, syclex::save_log{&log},
                                                  syclex::registered_names{names}});
    (void)obj;
  } catch (sycl::exception &e) {
    throw CompileError("compiling " + entry + " failed: " + e.what() +
                       (log.empty() ? std::string() : "\ncompiler log:\n" + log));
  }
  return log;
}

DeviceCaps device_caps(const sycl::device &d) {
  DeviceCaps c;
  c.esimd = d.has(sycl::aspect::ext_intel_esimd);
  c.fp64 = d.has(sycl::aspect::fp64);
  c.cpu = d.is_cpu();
  c.max_wg = d.get_info<sycl::info::device::max_work_group_size>();
  c.compute_units = d.get_info<sycl::info::device::max_compute_units>();
  c.cache_bytes = std::size_t(d.get_info<sycl::info::device::global_mem_cache_size>());
  c.sg_sizes = d.get_info<sycl::info::device::sub_group_sizes>();
  c.preferred_sg = 0;
  for (size_t s : c.sg_sizes)
    if (s == 16) c.preferred_sg = 16;
  if (!c.preferred_sg)
    for (size_t s : c.sg_sizes)
      if (s <= 32) c.preferred_sg = std::max(c.preferred_sg, s);
  if (!c.preferred_sg) c.preferred_sg = 1;
  return c;
}

const DeviceCaps &caps_of(const sycl::queue &q) {
  // Device queries are cheap but not free; keep the last device's answers.
  thread_local std::optional<sycl::device> last;
  thread_local DeviceCaps caps;
  sycl::device d = q.get_device();
  if (!last || *last != d) {
    caps = device_caps(d);
    last = std::move(d);
  }
  return caps;
}

}  // namespace gnnsparse::sycl_rt
