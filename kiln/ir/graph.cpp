#include "kiln/ir/graph.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "kiln/api/functional.h"
#include "kiln/core/overloaded.h"

namespace kiln::ir {

namespace {

std::string ref_str(const Ref& r) {
  return r.output == 0 ? "%" + r.node->name() : fmt::format("%{}.{}", r.node->name(), r.output);
}

std::string ints_str(const IntList& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string arg_str(const Arg& a) {
  return std::visit(Overloaded{[](std::monostate) -> std::string { return "None"; },
                               [](const Ref& r) { return ref_str(r); },
                               [](const RefList& l) {
                                 std::string s = "[";
                                 for (size_t i = 0; i < l.size(); ++i)
                                   s += (i ? ", " : "") + ref_str(l[i]);
                                 return s + "]";
                               },
                               [](const Scalar& v) { return v.str(); },
                               [](int64_t v) { return std::to_string(v); },
                               [](double v) { return fmt::format("{}", v); },
                               [](bool v) -> std::string { return v ? "True" : "False"; },
                               [](const IntList& v) { return ints_str(v); },
                               [](DType d) { return std::string(to_string(d)); },
                               [](Device d) { return d.str(); },
                               [](Str s) { return fmt::format("'{}'", s.view()); },
                               [](const SymIntList& v) { return v.dims().str(); }},
                    a);
}

// Whether a non-tensor argument equals its schema default (then the printer omits it).
bool is_default(const Arg& a, const std::optional<Value>& def) {
  if (!def) return false;
  return std::visit(
      Overloaded{[&](std::monostate) { return std::holds_alternative<std::monostate>(*def); },
                 [](const Ref&) { return false; }, [](const RefList&) { return false; },
                 [&](const auto& v) {
                   using T = std::decay_t<decltype(v)>;
                   auto* d = std::get_if<T>(&*def);
                   return d && *d == v;
                 }},
      a);
}

bool arg_matches(const Arg& a, ops::ArgType type) {
  using ops::ArgType;
  switch (type) {
    case ArgType::tensor:  // a scalar stands for a wrapped number (see wrapped_number)
      return std::holds_alternative<Ref>(a) || std::holds_alternative<Scalar>(a);
    case ArgType::opt_tensor:
      return std::holds_alternative<Ref>(a) || std::holds_alternative<std::monostate>(a);
    case ArgType::tensor_list: return std::holds_alternative<RefList>(a);
    default: break;
  }
  // Non-tensor alternatives are the same in Arg and Value.
  Value v = std::visit(Overloaded{[](const Ref&) -> Value { return Value(); },
                                  [](const RefList&) -> Value { return Value(); },
                                  [](const auto& x) -> Value { return Value(x); }},
                       a);
  return ops::value_matches(v, type);
}

std::string constant_str(const Tensor& t) {
  if (t.is_fake() || t.numel() > 6) return "<" + ValueMeta::of(t).str() + ">";
  std::vector<double> v = to_vector<double>(t);
  bool fp = is_floating(t.dtype());
  auto one = [fp](double d) {  // floats print as 2. or 2.5, integers as 2
    std::string s = fmt::format("{}", d);
    return fp && s.find_first_of(".en") == std::string::npos ? s + "." : s;
  };
  std::string s = t.dim() == 0 ? "" : "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + one(v[i]);
  return s + (t.dim() == 0 ? "" : "]");
}

}  // namespace

ValueMeta ValueMeta::of(const Tensor& t) {
  return {t.shape(), t.strides(), t.sym_offset(), t.dtype(), t.device()};
}

std::string ValueMeta::str() const {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) dims += ',';
    dims += shape.sym(i).str();
  }
  return fmt::format("{}[{}]@{}", dtype, dims, device);
}

std::vector<Ref> Node::inputs() const {
  std::vector<Ref> out;
  for (const Arg& a : args_) {
    if (auto* r = std::get_if<Ref>(&a))
      out.push_back(*r);
    else if (auto* l = std::get_if<RefList>(&a))
      out.insert(out.end(), l->begin(), l->end());
  }
  return out;
}

void NodeDeleter::operator()(Node* node) const {
  node->~Node();
  PoolAllocator<Node>().deallocate(node, 1);
}

namespace {
NodePtr new_node() { return NodePtr(new (PoolAllocator<Node>().allocate(1)) Node()); }
}  // namespace

// Note [Node names]
// Every node gets a name unique in its graph: a given one ("x") or its op's ("add"), and
// when that is taken the first free "base_k" ("add_1", "add_2", ...). Names are made
// lazily: a trace records thousands of nodes whose names nobody reads, so appending a
// node only marks it unnamed, and the first name() asked for names every unnamed node in
// creation order. A name therefore does not depend on when it is asked for; a node erased
// before being named still takes its name (as in FX, a name once made stays taken).
//
// One table entry per base or name given as such. A given name is marked taken; the
// names made by numbering a base are not stored: every base_k with k up to the base's
// counter is taken, so a chain of 100k adds keeps one small table. Call nodes named
// after their op reach its entry through a per-OpKind cache (no hashing).
//
// Note [Borrowed names]
// A joint capture's backward graph names each saved value after its forward node
// ("saved_relu_3"), but naming the forward graph to build it cost 5% of a capture, for
// names most captures never print. So the backward input keeps a link to its source
// node, and the source's name is read when the backward graph's names are made. The two
// graphs share the links (NameLinks); the source graph keeps them in lent_ and, before a
// source node can go (the graph destroyed or assigned to, the node erased), reads every
// name still borrowed, so a link never outlives its source. Nobody borrowing any more
// (the backward graph gone first, as a JointProgram's is) reads nothing. Lock order:
// the borrower's Namer, the links, the source's Namer.
struct NameLinks {
  struct Link {
    const Node* source;  // null once the name is read
    size_t at;           // where in `name` (prefix + suffix until read) the source's name goes
    std::string name;
  };
  explicit NameLinks(const Namer* of) : from(of) { links.reserve(64); }
  // The full name of link `i`.
  std::string name(size_t i) {
    std::lock_guard lock(mutex);
    read_names();
    return links[i].name;
  }
  void read_names() {  // under mutex
    for (Link& l : links)
      if (l.source) l.name.insert(l.at, std::exchange(l.source, nullptr)->name());
  }
  std::mutex mutex;
  const Namer* const from;  // the source graph's Namer (stays put when that graph moves)
  std::vector<Link> links;
};

class Namer {
 public:
  // A node appended unnamed: nodes are only appended, so the unnamed ones are the tail
  // of the list from next_, plus the erased ones kept in erased_.
  void enqueue(Node* n) {
    if (!next_) next_ = n;
    n->namer_.store(this, std::memory_order_relaxed);
  }
  // Whether no node has been named or erased yet (the list may then be reordered).
  bool untouched(const Node* head) const { return next_ == head && erased_.empty(); }
  void restart(Node* head) { next_ = head; }
  // Erased before named (called before it leaves the list): keep what its name is made of.
  void forget(Node* n) {
    if (n->name_link_ >= 0) n->name_ = borrowed_->name(static_cast<size_t>(n->name_link_));
    erased_.push_back(
        {n->id_, n->op_, kind_of(n), n->given_name_ ? std::move(n->name_) : std::string()});
    if (next_ == n) next_ = n->next_;
  }
  // Names every unnamed node, erased ones included, in creation order (Node::name() of a
  // const graph may be called from several threads).
  void name_all(const Node* asking) {
    std::lock_guard lock(mutex_);
    if (!asking->namer_.load(std::memory_order_relaxed)) return;  // named meanwhile
    std::sort(erased_.begin(), erased_.end(),
              [](const Erased& x, const Erased& y) { return x.id < y.id; });
    auto e = erased_.begin();
    std::string name;
    for (Node* n = next_; n; n = n->next_) {
      for (; e != erased_.end() && e->id < n->id_; ++e)
        make(e->kind, e->op, e->base, name);  // stays taken
      if (n->name_link_ >= 0) n->name_ = borrowed_->name(static_cast<size_t>(n->name_link_));
      make(kind_of(n), n->op_, n->name_, name);
      n->name_.swap(name);
      n->namer_.store(nullptr, std::memory_order_release);
    }
    for (; e != erased_.end(); ++e) make(e->kind, e->op, e->base, name);
    erased_.clear();
    next_ = nullptr;
  }

  // Links `n` (just appended) to `source` of the graph whose Namer is `from`; the links
  // are made on first use and kept in that graph's lent_ (again after it settled them).
  // False when this graph borrows from another graph already: one source graph each.
  bool borrow(Node* n, const Namer* from, const Node* source, std::string_view prefix,
              std::string_view suffix, std::vector<std::shared_ptr<NameLinks>>& lent) {
    // A graph that borrows lends nothing, so no chain of links comes back to its start
    // (whose locks would then be taken in both orders).
    if ((borrowed_ && borrowed_->from != from) || from->borrowed_) return false;
    if (!borrowed_) borrowed_ = std::make_shared<NameLinks>(from);
    if (std::find(lent.begin(), lent.end(), borrowed_) == lent.end()) lent.push_back(borrowed_);
    // No lock: both graphs are being changed (nobody reads either meanwhile).
    n->name_link_ = static_cast<int32_t>(borrowed_->links.size());
    std::string name;
    name.reserve(prefix.size() + suffix.size());
    name.append(prefix).append(suffix);
    borrowed_->links.push_back({source, prefix.size(), std::move(name)});
    return true;
  }

 private:
  enum class Kind : uint8_t { given, op, output };  // what a name is made from
  static Kind kind_of(const Node* n) {
    return n->given_name_ ? Kind::given : n->opcode_ == Opcode::output ? Kind::output : Kind::op;
  }
  struct Erased {
    uint32_t id;
    ops::OpKind op;
    Kind kind;
    std::string base;  // a given name
  };
  // Writes into `name` the name of a node of this kind, op and given base.
  void make(Kind kind, ops::OpKind op, const std::string& given, std::string& name) {
    if (kind == Kind::given)
      unique_name(given, name);
    else if (kind == Kind::output)
      unique_name("output", name);
    else
      unique_name(op_base(op), name, &op_entry(op));
  }
  struct Numbering {
    int last = 0;                 // base_1 .. base_last are taken
    bool given = false;           // the name itself is taken as given
    bool given_numbered = false;  // some name "base_k" was given as such
    bool base_tried = false;      // the base was asked for (taken by it or before it)
  };
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const {  // FNV-1a: names are short
      uint64_t h = 14695981039346656037ull;
      for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
      return h;
    }
  };

  static std::string_view op_base(ops::OpKind op) {  // an extension op without its namespace
    std::string_view name = ops::op_name(op);
    size_t sep = name.rfind("::");
    return sep == std::string_view::npos ? name : name.substr(sep + 2);
  }
  Numbering*& op_entry(ops::OpKind op) {
    auto k = static_cast<size_t>(op);
    if (k >= op_names_.size()) op_names_.resize(k + 1);
    return op_names_[k];
  }
  Numbering& entry(std::string_view name) {
    return names_.try_emplace(std::string(name)).first->second;  // mostly new: one lookup
  }

  // "base_k" with k a number without leading zeros -> (base, k); else (name, 0).
  static std::pair<std::string_view, int> split_number(std::string_view name) {
    size_t sep = name.rfind('_');
    if (sep == std::string_view::npos || sep + 1 == name.size() || name[sep + 1] == '0' ||
        name.size() - sep - 1 > 9)
      return {name, 0};
    int k = 0;
    for (size_t i = sep + 1; i < name.size(); ++i) {
      if (name[i] < '0' || name[i] > '9') return {name, 0};
      k = k * 10 + (name[i] - '0');
    }
    return {name.substr(0, sep), k};
  }

  // Writes a name not taken yet, made from `base`, into `name`.
  void unique_name(std::string_view base, std::string& name, Numbering** cache = nullptr) {
    if (base.empty()) base = "v";
    if (base[0] == '_') base.remove_prefix(1);  // "_to_copy" prints as %to_copy
    // A base seen before goes straight to its next number: one lookup per node, none
    // for a call node whose op was named before.
    Numbering* num = cache && *cache ? *cache : &entry(base);
    if (cache) *cache = num;
    if (!num->base_tried) {  // the base itself, once
      num->base_tried = true;
      auto [b, k] = split_number(base);
      Numbering* of_b = k > 0 ? &entry(b) : nullptr;
      if (!num->given && !(of_b && of_b->last >= k)) {  // free: not given, not b's number
        num->given = true;
        // A name given as "b_k" may later collide with b's own numbering: mark b.
        if (of_b) of_b->given_numbered = true;
        name.assign(base);
        return;
      }
    }
    // base_k can only be taken as given (numbered names of base are all below k)
    char digits[16];
    do {  // written in place: base, '_', digits
      size_t n = static_cast<size_t>(
          std::to_chars(digits, digits + sizeof digits, ++num->last).ptr - digits);
      name.resize(base.size() + 1 + n);
      char* out = name.data();
      std::memcpy(out, base.data(), base.size());
      out[base.size()] = '_';
      std::memcpy(out + base.size() + 1, digits, n);
    } while (num->given_numbered && [&] {
      auto it = names_.find(name);
      return it != names_.end() && it->second.given;
    }());
  }

  Node* next_ = nullptr;                 // the first node in the list not named yet
  std::vector<Erased> erased_;           // erased before named
  std::shared_ptr<NameLinks> borrowed_;  // names taken from another graph's nodes
  std::unordered_map<std::string, Numbering, NameHash, std::equal_to<>,
                     PoolAllocator<std::pair<const std::string, Numbering>>>
      names_;
  std::vector<Numbering*> op_names_;  // by OpKind; entries of a node-based map are stable
  std::mutex mutex_;
};

// Loads the namer again: another thread may have named this node since name() looked.
void Node::name_now() const {
  if (Namer* namer = namer_.load(std::memory_order_acquire)) namer->name_all(this);
}

Graph::Graph() = default;
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&& other) noexcept {
  if (this != &other) {
    settle_lent_names();  // this graph's nodes go
    owned_ = std::move(other.owned_);
    head_ = std::exchange(other.head_, nullptr);
    tail_ = std::exchange(other.tail_, nullptr);
    output_ = std::exchange(other.output_, nullptr);
    namer_ = std::move(other.namer_);
    lent_ = std::move(other.lent_);
    next_id_ = std::exchange(other.next_id_, 0);
  }
  return *this;
}
Graph::~Graph() { settle_lent_names(); }

void Graph::settle_lent_names() {
  for (const auto& links : lent_) {
    if (links.use_count() == 1) continue;  // no borrower left
    std::lock_guard lock(links->mutex);
    links->read_names();
  }
  lent_.clear();
}

Node* Graph::insert_call(Node* before, ops::OpKind op, ArgList args, MetaList meta,
                         std::string scope) {
  KILN_CHECK(before && before->opcode_ != Opcode::input, invalid_graph,
             "[graph] a call is inserted before a call or the output node");
  auto node = new_node();
  node->opcode_ = Opcode::call;
  node->op_ = op;
  node->args_ = std::move(args);
  node->meta_ = std::move(meta);
  node->scope_ = std::move(scope);
  Node* n = node.get();
  n->prev_ = before->prev_;
  n->next_ = before;
  (before->prev_ ? before->prev_->next_ : head_) = n;
  before->prev_ = n;
  n->owner_slot_ = owned_.size();
  n->id_ = next_id_++;
  namer_->enqueue(n);
  owned_.push_back(std::move(node));
  link_uses(n);
  return n;
}

Node* Graph::append(NodePtr node) {
  KILN_CHECK(!output_, invalid_graph, "[graph] cannot add node {} after the output node",
             node->given_name_
                 ? "%" + node->name_
                 : fmt::format("({})",
                               node->opcode_ == Opcode::call ? ops::op_name(node->op_) : "output"));
  Node* n = node.get();
  n->prev_ = tail_;
  if (tail_)
    tail_->next_ = n;
  else
    head_ = n;
  tail_ = n;
  n->owner_slot_ = owned_.size();
  n->id_ = next_id_++;
  if (!namer_) {  // the first node
    namer_ = std::make_unique<Namer>();
    owned_.reserve(64);
  }
  namer_->enqueue(n);
  owned_.push_back(std::move(node));
  link_uses(n);
  return n;
}

// Called for a node just appended, whose repeated uses of one input are adjacent in
// that input's user list, so checking the last entry keeps each user once.
void Graph::link_uses(Node* n) {
  n->for_each_input([n](const Ref& r) {
    auto& u = r.node->users_;
    if (u.empty() || u.back() != n) u.push_back(n);
  });
}

Node* Graph::add_input(std::string name, ValueMeta meta) {
  auto n = new_node();
  n->opcode_ = Opcode::input;
  n->name_ = std::move(name);
  n->given_name_ = true;
  n->meta_.push_back(std::move(meta));
  return append(std::move(n));
}

Node* Graph::add_input_named_after(Graph& from, Node* source, std::string_view prefix,
                                   std::string_view suffix, ValueMeta meta) {
  KILN_CHECK(&from != this && source->owner_slot_ < from.owned_.size() &&
                 from.owned_[source->owner_slot_].get() == source,
             internal,
             "[graph] add_input_named_after: the source is not a node of the other graph");
  Node* n = add_input({}, std::move(meta));
  if (namer_->borrow(n, from.namer_.get(), source, prefix, suffix, from.lent_)) {
    source->lends_name_ = true;
  } else {  // a second source graph, or one that borrows itself: the name is made now
    n->name_ = std::string(prefix) + source->name() + std::string(suffix);
  }
  return n;
}

Node* Graph::add_constant(Tensor value, std::string name) {
  auto n = new_node();
  n->opcode_ = Opcode::constant;
  n->name_ = name.empty() ? std::string("const") : std::move(name);
  n->given_name_ = true;
  n->meta_.push_back(ValueMeta::of(value));
  n->value_ = std::move(value);
  return append(std::move(n));
}

Node* Graph::add_call(ops::OpKind op, ArgList args, MetaList meta, std::string scope,
                      std::string name) {
  auto n = new_node();
  n->opcode_ = Opcode::call;
  n->op_ = op;
  if (!name.empty()) {  // else named after the op
    n->name_ = std::move(name);
    n->given_name_ = true;
  }
  n->args_ = std::move(args);
  n->meta_ = std::move(meta);
  n->scope_ = std::move(scope);
  return append(std::move(n));
}

Node* Graph::set_output(RefList values) {
  auto n = new_node();
  n->opcode_ = Opcode::output;
  n->args_.push_back(std::move(values));
  Node* out = append(std::move(n));
  output_ = out;
  return out;
}

void Graph::rewrite_devices(const std::function<Device(Device)>& f) {
  for (Node* n = head_; n; n = n->next_) {
    for (ValueMeta& m : n->meta_) m.device = f(m.device);
    for (Arg& a : n->args_)
      if (auto* d = std::get_if<Device>(&a)) *d = f(*d);
  }
}

void Graph::set_constant_value(Node* node, Tensor value) {
  KILN_CHECK(node->opcode_ == Opcode::constant, invalid_graph, "[graph] %{} is not a constant",
             node->name());
  node->meta_[0] = ValueMeta::of(value);
  node->value_ = std::move(value);
}

void Graph::erase(Node* node) {
  KILN_CHECK(node->users_.empty(), value,
             "[graph] cannot erase %{}: it still has {} user(s), e.g. %{}", node->name(),
             node->users_.size(), node->users_[0]->name());
  node->for_each_input([node](const Ref& r) { std::erase(r.node->users_, node); });
  if (node->lends_name_) settle_lent_names();
  if (node->namer_.load(std::memory_order_relaxed)) namer_->forget(node);  // its name stays taken
  if (node->prev_)
    node->prev_->next_ = node->next_;
  else
    head_ = node->next_;
  if (node->next_)
    node->next_->prev_ = node->prev_;
  else
    tail_ = node->prev_;
  if (output_ == node) output_ = nullptr;
  size_t slot = node->owner_slot_;  // swap with the last owned node, then drop it
  std::swap(owned_[slot], owned_.back());
  owned_[slot]->owner_slot_ = slot;
  owned_.pop_back();
}

void Graph::move_inputs_to_front(const std::vector<Node*>& inputs) {
  KILN_CHECK(!namer_ || namer_->untouched(head_), internal,
             "[graph] inputs can be reordered only before any node is named or erased");
  for (const Node* n : inputs)  // all checked before any moves
    KILN_CHECK(n->opcode_ == Opcode::input && n->owner_slot_ < owned_.size() &&
                   owned_[n->owner_slot_].get() == n,
               internal, "[graph] move_inputs_to_front: not an input of this graph");
  for (auto it = inputs.rbegin(); it != inputs.rend(); ++it) {
    Node* n = *it;
    if (n == head_) continue;
    n->prev_->next_ = n->next_;  // unlink (not the head, so it has a prev)
    if (n->next_)
      n->next_->prev_ = n->prev_;
    else
      tail_ = n->prev_;
    n->prev_ = nullptr;  // relink first
    n->next_ = head_;
    head_->prev_ = n;
    head_ = n;
  }
  if (namer_) namer_->restart(head_);
}

void Graph::set_op(Node* n, ops::OpKind op) {
  KILN_CHECK(n->opcode_ == Opcode::call, invalid_graph, "[graph] %{} is not a call", n->name());
  n->op_ = op;
}

void Graph::set_call(Node* n, ops::OpKind op, ArgList args) {
  KILN_CHECK(n->opcode_ == Opcode::call, invalid_graph, "[graph] %{} is not a call", n->name());
  n->for_each_input([n](const Ref& r) { std::erase(r.node->users_, n); });
  n->op_ = op;
  n->args_ = std::move(args);
  link_uses(n);
}

void Graph::replace_uses_in(Node* user, Node* from, Node* to) {
  for (Arg& a : user->args_) {
    if (auto* r = std::get_if<Ref>(&a); r && r->node == from)
      r->node = to;
    else if (auto* l = std::get_if<RefList>(&a))
      for (Ref& x : *l)
        if (x.node == from) x.node = to;
  }
  auto& was = from->users_;
  was.erase(std::remove(was.begin(), was.end(), user), was.end());
  auto& now = to->users_;
  if (std::find(now.begin(), now.end(), user) == now.end()) now.push_back(user);
}

void Graph::replace_all_uses(Node* from, Node* to) {
  std::vector<Node*> users(from->users_.begin(), from->users_.end());
  for (Node* user : users) {
    auto fix = [&](Ref& r) {
      if (r.node == from) r.node = to;
    };
    for (Arg& a : user->args_) {
      if (auto* r = std::get_if<Ref>(&a))
        fix(*r);
      else if (auto* l = std::get_if<RefList>(&a))
        for (Ref& r : *l) fix(r);
    }
    auto& u = to->users_;
    if (std::find(u.begin(), u.end(), user) == u.end()) u.push_back(user);
  }
  from->users_.clear();
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  for (Node* n = head_; n; n = n->next_) out.push_back(n);
  return out;
}

std::vector<Node*> Graph::inputs() const {
  std::vector<Node*> out;
  for (Node* n = head_; n; n = n->next_)
    if (n->opcode_ == Opcode::input) out.push_back(n);
  return out;
}

size_t Graph::size() const { return owned_.size(); }

std::string Graph::str() const {
  std::string out;
  for (Node* n = head_; n; n = n->next_) {
    std::string meta;
    if (n->meta_.size() == 1) meta = n->meta_[0].str();
    for (size_t i = 0; n->meta_.size() > 1 && i < n->meta_.size(); ++i)
      meta += (i ? ", " : "(") + n->meta_[i].str() + (i + 1 == n->meta_.size() ? ")" : "");
    switch (n->opcode_) {
      case Opcode::input: out += fmt::format("%{} : {} = input()", n->name(), meta); break;
      case Opcode::constant:
        out += fmt::format("%{} : {} = constant({})", n->name(), meta, constant_str(n->value_));
        break;
      case Opcode::call: {
        const auto& specs = ops::op_info(n->op_).schema.args;
        std::string args;
        for (size_t i = 0; i < n->args_.size(); ++i) {
          const Arg& a = n->args_[i];
          // Tensor positions print positionally, numbers in them too: mul(%x, 0.125).
          bool tensor = std::holds_alternative<Ref>(a) || std::holds_alternative<RefList>(a) ||
                        (i < specs.size() && specs[i].type == ops::ArgType::tensor);
          if (!tensor && i < specs.size() && is_default(a, specs[i].default_value)) continue;
          if (!args.empty()) args += ", ";
          args += tensor || i >= specs.size() ? arg_str(a) : specs[i].name + "=" + arg_str(a);
        }
        out += fmt::format("%{} : {} = {}({})", n->name(), meta, ops::op_name(n->op_), args);
        break;
      }
      case Opcode::output: {
        const RefList& refs = std::get<RefList>(n->args_[0]);
        std::string vals;
        for (size_t i = 0; i < refs.size(); ++i) vals += (i ? ", " : "") + ref_str(refs[i]);
        out += refs.size() == 1 ? "return " + vals : "return (" + vals + ")";
        break;
      }
    }
    if (!n->scope_.empty()) out += "  # " + n->scope_;
    out += "\n";
  }
  return out;
}

void Graph::verify() const {
  std::unordered_set<const Node*> owned, seen;
  for (const auto& p : owned_) owned.insert(p.get());
  size_t count = 0;
  for (Node* n = head_; n; n = n->next_, ++count) {
    auto bad = [&](std::string_view why, const auto&... args) {
      fail(ErrorKind::invalid_graph, "[verify] node %{}: {}", n->name(),
           fmt::format(fmt::runtime(why), args...));
    };
    if (!owned.count(n)) bad("is not owned by this graph");
    if (n->next_ && n->next_->prev_ != n) bad("broken list link to the next node");
    if (n->opcode_ == Opcode::output && n != tail_) bad("the output node must be last");
    for (const Ref& r : n->inputs()) {
      if (!owned.count(r.node)) bad("uses a node that is not in this graph");
      if (!seen.count(r.node)) bad("uses %{} before it is defined", r.node->name());
      if (r.output < 0 || r.output >= static_cast<int>(r.node->meta_.size()))
        bad("uses output {} of %{}, which has {}", r.output, r.node->name(), r.node->meta_.size());
      const auto& u = r.node->users_;
      if (std::find(u.begin(), u.end(), n) == u.end())
        bad("is missing from the users of %{}", r.node->name());
    }
    for (Node* user : n->users_) {
      auto in = user->inputs();
      if (std::none_of(in.begin(), in.end(), [&](const Ref& r) { return r.node == n; }))
        bad("lists %{} as a user, but %{} does not use it", user->name(), user->name());
    }
    switch (n->opcode_) {
      case Opcode::input:
      case Opcode::constant:
        if (n->meta_.size() != 1) bad("must have exactly one meta entry");
        if (n->opcode_ == Opcode::constant && !n->value_.defined()) bad("constant without a value");
        break;
      case Opcode::call: {
        const ops::OpInfo& info = ops::op_info(n->op_);
        if (static_cast<int>(n->meta_.size()) != info.schema.num_outputs)
          bad("has {} meta entries, but {} returns {}", n->meta_.size(), info.name,
              info.schema.num_outputs);
        if (n->args_.size() != info.schema.args.size())
          bad("{} takes {} arguments, got {}", info.name, info.schema.args.size(), n->args_.size());
        for (size_t i = 0; i < n->args_.size(); ++i)
          if (!arg_matches(n->args_[i], info.schema.args[i].type))
            bad("argument '{}' of {} must be {}", info.schema.args[i].name, info.name,
                ops::to_string(info.schema.args[i].type));
        break;
      }
      case Opcode::output:
        if (n->args_.size() != 1 || !std::holds_alternative<RefList>(n->args_[0]))
          bad("the output node takes one list of values");
        break;
    }
    seen.insert(n);
  }
  KILN_CHECK(count == owned_.size(), invalid_graph,
             "[verify] the node list holds {} nodes but the graph owns {}", count, owned_.size());
  KILN_CHECK(output_ && output_ == tail_, invalid_graph, "[verify] the graph has no output node");
}

int eliminate_dead_code(Graph& graph) {
  int removed = 0;
  for (Node* n = graph.output() ? graph.output()->prev() : nullptr; n;) {
    Node* prev = n->prev();
    bool removable = n->opcode() == Opcode::constant ||
                     (n->opcode() == Opcode::call && !ops::op_info(n->op()).is_inplace() &&
                      !ops::is_data_dependent(n->op()));  // (Y3) it binds a size
    if (removable && n->users().empty()) {
      graph.erase(n);
      ++removed;
    }
    n = prev;
  }
#ifndef NDEBUG
  graph.verify();  // after every pass in debug builds
#endif
  return removed;
}

namespace {

// Call nodes keyed by (op, arguments) without formatting anything: a hash over the
// arguments and an equality that compares floats by their bits (x * -0.0 is not x * 0.0,
// and a NaN argument equals itself).
uint64_t mix(uint64_t h, uint64_t v) {
  return (h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}
uint64_t bits_of(double d) { return std::bit_cast<uint64_t>(d); }
uint64_t scalar_bits(const Scalar& s) {
  return s.is_floating() ? bits_of(s.to_double()) : static_cast<uint64_t>(s.to_int());
}

uint64_t arg_hash(const Arg& a) {
  uint64_t h = a.index();
  std::visit(
      Overloaded{
          [&](const std::monostate&) {},
          [&](const Ref& r) { h = mix(mix(h, reinterpret_cast<uintptr_t>(r.node)), r.output); },
          [&](const RefList& l) {
            for (const Ref& r : l) h = mix(mix(h, reinterpret_cast<uintptr_t>(r.node)), r.output);
          },
          [&](const Scalar& v) {
            h = mix(mix(h, static_cast<uint64_t>(v.kind())), scalar_bits(v));
          },
          [&](int64_t v) { h = mix(h, static_cast<uint64_t>(v)); },
          [&](double v) { h = mix(h, bits_of(v)); }, [&](bool v) { h = mix(h, v); },
          [&](const IntList& l) {
            for (int64_t v : l) h = mix(h, static_cast<uint64_t>(v));
          },
          [&](DType v) { h = mix(h, static_cast<uint64_t>(v)); },
          [&](const Device& v) {
            h = mix(mix(h, static_cast<uint64_t>(v.type)), static_cast<uint64_t>(v.index));
          },
          [&](const Str& v) { h = mix(h, std::hash<std::string_view>()(v.view())); },
          [&](const SymIntList& l) {
            for (size_t i = 0; i < l.dims().size(); ++i)
              h = mix(h, std::hash<std::string>()(l.dims().sym(i).str()));
          }},
      a);
  return h;
}

bool arg_equal(const Arg& a, const Arg& b) {
  if (a.index() != b.index()) return false;
  if (const Scalar* x = std::get_if<Scalar>(&a)) {
    const Scalar& y = std::get<Scalar>(b);
    return x->kind() == y.kind() && scalar_bits(*x) == scalar_bits(y);
  }
  if (const double* x = std::get_if<double>(&a)) return bits_of(*x) == bits_of(std::get<double>(b));
  return a == b;
}

uint64_t call_hash(const Node* n) {
  uint64_t h = static_cast<uint64_t>(n->op());
  for (const Arg& a : n->args()) h = mix(h, arg_hash(a));
  return h;
}
bool same_call(const Node* x, const Node* y) {
  if (x->op() != y->op() || x->args().size() != y->args().size()) return false;
  for (size_t i = 0; i < x->args().size(); ++i)
    if (!arg_equal(x->args()[i], y->args()[i])) return false;
  return true;
}

}  // namespace

int eliminate_common_subexpressions(Graph& graph) {
  // An open-addressing table of the calls seen, at most half full: one allocation per
  // pass (it runs on every captured backward, whose cost per node is a benchmark row).
  size_t calls = 0;
  for (Node* n = graph.first(); n; n = n->next()) calls += n->opcode() == Opcode::call;
  size_t cap = std::bit_ceil(std::max<size_t>(2 * calls, 8));
  std::vector<Node*> table(cap, nullptr);
  int merged = 0;
  for (Node* n = graph.first(); n;) {
    Node* next = n->next();
    if (n->opcode() == Opcode::call) {
      if (ops::op_info(n->op()).is_inplace()) {
        std::fill(table.begin(), table.end(), nullptr);  // values computed before may differ after
      } else if (n->op() != ops::OpKind::rand && n->op() != ops::OpKind::randn &&
                 !ops::is_data_dependent(n->op())) {  // (Y3) each binds its own symbol
        size_t i = static_cast<size_t>((call_hash(n) * 0x9e3779b97f4a7c15ULL) >> 32) & (cap - 1);
        while (table[i] && !same_call(table[i], n)) i = (i + 1) & (cap - 1);
        if (!table[i]) {
          table[i] = n;
        } else {
          graph.replace_all_uses(n, table[i]);
          graph.erase(n);
          ++merged;
        }
      }
    }
    n = next;
  }
#ifndef NDEBUG
  graph.verify();
#endif
  return merged;
}

int merge_equal_constants(Graph& graph) {
  std::unordered_set<const Node*> mutated;
  for (Node* n : graph.nodes())
    if (n->opcode() == Opcode::call && ops::op_info(n->op()).is_inplace())
      mutated.insert(std::get<Ref>(n->args()[ops::op_info(n->op()).schema.mutated_arg]).node);
  auto mergeable = [&](const Node* n) {
    const Tensor& v = n->value();
    return !mutated.contains(n) && !v.is_fake() && v.device().is_cpu() && v.is_contiguous();
  };
  auto equal = [](const Tensor& a, const Tensor& b) {
    return a.dtype() == b.dtype() && a.shape() == b.shape() && a.device() == b.device() &&
           (a.numel() == 0 || std::memcmp(a.raw_data(), b.raw_data(),
                                          static_cast<size_t>(a.numel()) * a.itemsize()) == 0);
  };
  std::vector<Node*> kept;
  int merged = 0;
  for (Node* n = graph.first(); n;) {
    Node* next = n->next();
    if (n->opcode() == Opcode::constant && mergeable(n)) {
      auto same = std::find_if(kept.begin(), kept.end(),
                               [&](Node* k) { return equal(k->value(), n->value()); });
      if (same != kept.end()) {
        graph.replace_all_uses(n, *same);
        graph.erase(n);
        ++merged;
      } else {
        kept.push_back(n);
      }
    }
    n = next;
  }
  return merged;
}

}  // namespace kiln::ir
