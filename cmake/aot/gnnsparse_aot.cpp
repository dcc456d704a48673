// gnnsparse_aot: build-time SPIR-V of every kernel instance the dispatchers can pick.
//
//   gnnsparse_aot [--strict] [--sg N] <out.gnnspv> <entry> [<entry> ...]
//   gnnsparse_aot --list [--sg N] [<entry> ...]          (the instance names, one per line)
//
// For each entry file (spmm.hpp, esimd/sddmm.hpp, ...) the kernel_compiler compiles all of its
// instances in one call (the C++ front end runs once; no device code generation), split into one
// SPIR-V module per kernel (-fsycl-device-code-split=per_kernel). The runtime writes each module
// to the working directory (SYCL_DUMP_IMAGES=1; this also covers ESIMD modules, which a CPU device
// never turns into programs); each module's kernel is found from its OpEntryPoint and the
// demangled entry point matched to the instance key (sycl/instances.hpp), so the runtime looks an
// instance up by its 64-bit key.
// Portable instances are those of sub-group size N (default 16: the size the runtime picks on
// Intel CPUs and GPUs; other sizes compile from source at run time), float (sycl/policy.hpp) and
// quantized (sycl/quant_policy.hpp); ESIMD instances are all of sycl/esimd_policy.hpp and the
// ESIMD quantizer's of sycl/quant_policy.hpp. Output: the pack format of sycl/kernel_store.hpp.
//
// Needs an OpenCL device to drive the compiler (the CPU runtime of intel-opencl-rt). Without one
// it writes an empty pack and exits 0 (the runtime then compiles from source), unless --strict.
#include <cxxabi.h>
#include <dlfcn.h>

#include <sycl/backend/opencl.hpp>
#include <sycl/sycl.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "esimd_policy.hpp"
#include "kernel_store.hpp"
#include "policy.hpp"
#include "quant_policy.hpp"
#include "runtime.hpp"

namespace syclex = sycl::ext::oneapi::experimental;
namespace rt = gnnsparse::sycl_rt;
using rt::Instance;
namespace fs = std::filesystem;

namespace {

std::vector<Instance> instances_of(const std::string &entry, int sg) {
  std::vector<Instance> out;
  auto add = [&](Instance in) {
    if (entry == in.spec().entry) out.push_back(in);
  };
  rt::for_each_portable_instance(sg, add);
  rt::for_each_quant_instance(sg, add);
  gnnsparse::esimd_policy::for_each_esimd_instance(add);
  rt::for_each_esimd_quant_instance(add);
  return out;
}

// The name of the (single) OpEntryPoint of a SPIR-V module, or "".
std::string entry_point(const std::string &spv) {
  const auto *w = reinterpret_cast<const std::uint32_t *>(spv.data());
  const std::size_t n = spv.size() / 4;
  if (n < 5 || w[0] != 0x07230203u) return {};
  for (std::size_t i = 5; i < n;) {
    const std::uint32_t count = w[i] >> 16, op = w[i] & 0xffffu;
    if (count == 0 || i + count > n) return {};
    if (op == 15 && count > 3) return std::string(reinterpret_cast<const char *>(&w[i + 3]));  // OpEntryPoint
    i += count;
  }
  return {};
}

// The instance a kernel's mangled name denotes: the demangled template name must be one of the
// kernel table's and every template argument a type, bool or integer (enums print as "(T)n").
bool instance_of(const std::string &raw, Instance &out) {
  int status = 0;
  std::unique_ptr<char, void (*)(void *)> d(abi::__cxa_demangle(raw.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !d) return false;
  std::string s = d.get();
  for (std::size_t p; (p = s.find("__sycl_kernel_")) != std::string::npos;) s.erase(p, 14);
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  const std::size_t lt = s.find('<');
  if (lt == std::string::npos) return false;
  const std::string tmpl = s.substr(0, lt);
  int kernel = -1;
  for (int k = 0; k < rt::kKernelCount; ++k)
    if (tmpl == rt::spec(rt::Kernel(k)).cpp_name) kernel = k;
  if (kernel < 0) return false;
  std::vector<std::string> args;
  int depth = 0;
  std::string cur;
  std::size_t i = lt + 1;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '<' || c == '(') ++depth;
    if (c == '>' || c == ')') {
      if (depth == 0) break;
      --depth;
    }
    if (c == ',' && depth == 0) {
      args.push_back(cur);
      cur.clear();
      continue;
    }
    if (c != ' ' || !cur.empty()) cur += c;
  }
  args.push_back(cur);
  const rt::KernelSpec &spec = rt::spec(rt::Kernel(kernel));
  if (int(args.size()) != spec.nargs) return false;
  std::uint64_t key = std::uint64_t(kernel);
  for (int a = 0; a < spec.nargs; ++a) {
    std::string v = args[std::size_t(a)];
    if (const std::size_t cp = v.find(')'); v[0] == '(' && cp != std::string::npos) v = v.substr(cp + 1);
    long x;
    if (v == "float") x = long(gnnsparse::DType::f32);
    else if (v == "double") x = long(gnnsparse::DType::f64);
    else if (v == "int") x = long(gnnsparse::IType::i32);
    else if (v == "long") x = long(gnnsparse::IType::i64);
    else if (v == "true") x = 1;
    else if (v == "false") x = 0;
    else {
      char *end = nullptr;
      x = std::strtol(v.c_str(), &end, 10);
      if (!end || *end || x < 0) return false;
      if (spec.args[a] == rt::ArgKind::pow2) {  // stored as its exponent
        if ((x & (x - 1)) != 0) return false;
        x = rt::pow2_arg(std::uint64_t(x));
      }
      if (x > 255) return false;
    }
    key |= std::uint64_t(x) << (8 * (a + 1));
  }
  out = Instance::from_key(key);
  return true;
}

struct Module {
  Instance in;
  std::string raw, spv;
};

std::string slurp(const fs::path &p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::vector<Module> compile_entry(sycl::queue &q, const std::string &entry, const std::vector<Instance> &want,
                                  const fs::path &scratch) {
  std::vector<std::string> names;
  for (Instance in : want) names.push_back(rt::instance_name(in));
  std::string log;
  syclex::include_files inc;
  for (const auto &[path, text] : rt::kernel_sources()) inc.add(path, text);
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  const fs::path home = fs::current_path();
  fs::current_path(scratch);  // SYCL_DUMP_IMAGES writes here
  try {
    auto src = syclex::create_kernel_bundle_from_source(q.get_context(), syclex::source_language::sycl,
                                                        "#include \"" + entry + "\"\n", syclex::properties{inc});
    // the runtime's build options (sycl/runtime.cpp), one module per kernel
    const std::vector<std::string> opts = {"-fno-fast-math", "-ffp-contract=on",
                                           "-fsycl-device-code-split=per_kernel"};
    auto obj = syclex::compile(src, std::vector<sycl::device>{q.get_device()},
                               syclex::properties{syclex::build_options{opts}, syclex::save_log{&log},
                                                  syclex::registered_names{names}});
    (void)obj;
  } catch (sycl::exception &e) {
    fs::current_path(home);
    throw std::runtime_error(std::string("compiling ") + entry + " failed: " + e.what() + "\n" + log);
  }
  fs::current_path(home);
  std::map<std::uint64_t, Module> got;
  for (const auto &de : fs::directory_iterator(scratch)) {
    if (de.path().extension() != ".spv") continue;
    std::string spv = slurp(de.path());
    const std::string raw = entry_point(spv);
    if (std::getenv("GNNSPARSE_AOT_VERBOSE")) std::fprintf(stderr, "module %zu bytes: %s\n", spv.size(), raw.c_str());
    Instance in;
    if (raw.empty() || !instance_of(raw, in)) throw std::runtime_error("cannot tell which instance '" + raw + "' is");
    got[in.key()] = Module{in, raw, std::move(spv)};
  }
  fs::remove_all(scratch);
  std::vector<Module> out;
  for (Instance in : want) {
    auto it = got.find(in.key());
    if (it == got.end()) throw std::runtime_error("no SPIR-V module for " + rt::instance_name(in));
    out.push_back(std::move(it->second));
  }
  return out;
}

void write_pack(const std::string &path, const std::vector<Module> &mods) {
  std::vector<rt::PackRecord> recs(mods.size());
  std::uint64_t off = 8 + 8 + 4 + mods.size() * sizeof(rt::PackRecord);
  for (std::size_t i = 0; i < mods.size(); ++i) {
    recs[i].key = mods[i].in.key();
    recs[i].name_off = std::uint32_t(off);
    recs[i].name_len = std::uint32_t(mods[i].raw.size());
    off += mods[i].raw.size();
  }
  for (std::size_t i = 0; i < mods.size(); ++i) {
    recs[i].blob_off = off;
    recs[i].blob_len = mods[i].spv.size();
    recs[i].blob_hash = rt::fnv1a(mods[i].spv.data(), mods[i].spv.size());
    off += mods[i].spv.size();
  }
  const std::string tmp = path + ".tmp";
  std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
  const std::uint64_t hash = mods.empty() ? 0 : rt::source_hash();
  const std::uint32_t count = std::uint32_t(mods.size());
  f.write(rt::kPackMagic, 8);
  f.write(reinterpret_cast<const char *>(&hash), 8);
  f.write(reinterpret_cast<const char *>(&count), 4);
  f.write(reinterpret_cast<const char *>(recs.data()), std::streamsize(recs.size() * sizeof(rt::PackRecord)));
  for (const auto &m : mods) f.write(m.raw.data(), std::streamsize(m.raw.size()));
  for (const auto &m : mods) f.write(m.spv.data(), std::streamsize(m.spv.size()));
  f.close();
  if (!f || std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char **argv) {
  bool strict = false, list = false;
  int sg = 16;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--strict") strict = true;
    else if (a == "--list") list = true;
    else if (a == "--sg" && i + 1 < argc) sg = std::atoi(argv[++i]);
    else pos.push_back(a);
  }
  if (list) {
    for (const std::string &e : pos)
      for (Instance in : instances_of(e, sg)) std::printf("%s\n", rt::instance_name(in).c_str());
    return 0;
  }
  if (pos.size() < 2) {
    std::fprintf(stderr, "usage: %s [--strict] [--sg N] <out.gnnspv> <entry>...\n       %s --list [--sg N] <entry>...\n",
                 argv[0], argv[0]);
    return 2;
  }
  const std::string out = pos[0];
  setenv("SYCL_DUMP_IMAGES", "1", 1);  // before the runtime reads its configuration
  const fs::path scratch = fs::absolute(out + ".spv.d");
  try {
    std::unique_ptr<sycl::queue> q;
    for (const auto &d : sycl::device::get_devices())
      if (d.get_backend() == sycl::backend::opencl) {
        q = std::make_unique<sycl::queue>(d);
        break;
      }
    if (!q) throw std::runtime_error("no OpenCL device to drive the kernel compiler (install intel-opencl-rt)");
    std::vector<Module> all;
    for (std::size_t e = 1; e < pos.size(); ++e) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto want = instances_of(pos[e], sg);
      auto mods = compile_entry(*q, pos[e], want, scratch);
      std::size_t bytes = 0;
      for (const auto &m : mods) bytes += m.spv.size();
      std::printf("gnnsparse_aot: %s: %zu instances, %zu KiB of SPIR-V, %.1f s\n", pos[e].c_str(), mods.size(),
                  bytes / 1024, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      for (auto &m : mods) all.push_back(std::move(m));
    }
    write_pack(out, all);
  } catch (std::exception &ex) {
    std::fprintf(stderr, "gnnsparse_aot: %s\n", ex.what());
    if (strict) return 1;
    std::fprintf(stderr, "gnnsparse_aot: shipping no SPIR-V in %s; these kernels will compile from source at run time\n",
                 out.c_str());
    try {
      write_pack(out, {});
    } catch (...) {
      return 1;
    }
  }
  return 0;
}
