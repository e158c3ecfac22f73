#pragma once
// Overloaded: a visitor made of lambdas, for std::visit.

namespace kiln {

/** `std::visit(Overloaded{[](int) {...}, [](const auto&) {...}}, v)`. */
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
// Aggregate deduction for a pack of bases: C++20 has it, clang 14 does not.
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace kiln
