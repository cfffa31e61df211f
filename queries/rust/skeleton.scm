; Skeleton query for Rust. Captures:
;   @item.<kind>  a definition that becomes a fragment; @name its symbol
;   @body         a block elided in skeletons (function bodies)
;   @value.multiline  an initialiser spanning lines, elided to `…` (`const X: T = …;`)
;   @fold         a node kept only by its first line (macro definitions)
;   @comment      comments (only the first line of a run survives in skeletons)
;   @doc.marker   comments that document (other comment runs are dropped from skeletons)
;   @drop         lines dropped from skeletons (noise attributes)
;   @macro.body   a macro argument re-parsed as source (Rust cfg macros wrap whole items)
;   @fields       a struct's field list: runs of private fields become a counted label
;   @import       an import: runs of private imports become a counted label
(function_item name: (identifier) @name body: (block) @body) @item.function
(function_signature_item name: (identifier) @name) @item.function
(struct_item name: (type_identifier) @name) @item.struct
(union_item name: (type_identifier) @name) @item.struct
(enum_item name: (type_identifier) @name) @item.enum
(trait_item name: (type_identifier) @name) @item.trait
(impl_item type: (_) @name) @item.impl
(mod_item name: (identifier) @name) @item.module
(type_item name: (type_identifier) @name) @item.type
(const_item name: (identifier) @name) @item.const
(static_item name: (identifier) @name) @item.const
(macro_definition name: (identifier) @name) @item.macro @fold
(const_item value: (_) @value.multiline)
(static_item value: (_) @value.multiline)
(field_declaration_list) @fields
(use_declaration) @import
(line_comment) @comment
(block_comment) @comment
; Brace arguments of item-level macros (cfg_rt! { ... }) are parsed again as items; without
; items inside they keep only their first line.
(source_file (macro_invocation (token_tree) @macro.body))
(declaration_list (macro_invocation (token_tree) @macro.body))
; Rust documents with ///, //!, /** and /*!; plain comments are dropped from skeletons.
((line_comment) @doc.marker (#match? @doc.marker "^//[/!]"))
((block_comment) @doc.marker (#match? @doc.marker "^/\\*[*!]"))
; Attributes that say how, not what, are dropped; derive, test, repr, deprecated and cfg stay
; (`#[cfg(unix)]` says when an item exists at all: dropping it changes what the skeleton says).
; Inner attributes follow the same rule (`#![allow(...)]`, `#![doc(...)]`, `#![cfg_attr(docsrs, ...)]`).
((attribute_item) @drop (#not-match? @drop "^#\\[(derive|test|tokio::test|repr|non_exhaustive|deprecated|cfg\\()"))
((inner_attribute_item) @drop (#not-match? @drop "^#!\\[(derive|test|tokio::test|repr|non_exhaustive|cfg\\()"))
; A method of a standard trait whose signature the trait fixes entirely (`fmt`, `clone`,
; `default`, `eq`, `cmp`, `hash`, `drop`, `deref`, `next`, `poll`, `from_str`, `source`, …)
; says nothing the impl header and its associated types do not: its lines are dropped, body
; and all (the chunk id recovers them). Generic traits (`PartialEq<Other>`, `From<T>`) keep
; their methods: the signature names the other type. `Read`/`Write`/`Seek` only when qualified
; (`io::Write`), since a crate may define its own trait of that name.
(impl_item
  trait: (_) @std.trait
  (#match? @std.trait "^((std|core)::)?((fmt::)?(Debug|Display)|(clone::)?Clone|(default::)?Default|(cmp::)?(PartialEq|Eq|PartialOrd|Ord)|(hash::)?Hash|(ops::)?(Drop|Deref|DerefMut)|(iter::)?(Iterator|DoubleEndedIterator|ExactSizeIterator)|(future::)?Future|(str::)?FromStr|(error::)?Error|(io|fmt)::(Read|Write|BufRead|Seek))$")
  body: (declaration_list (function_item) @drop))
