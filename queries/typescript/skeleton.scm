; Skeleton query for TypeScript and TSX (see queries/rust/skeleton.scm for the capture names).
(function_declaration name: (identifier) @name body: (statement_block) @body) @item.function
(generator_function_declaration name: (identifier) @name body: (statement_block) @body) @item.function
(function_signature name: (identifier) @name) @item.function
(class_declaration name: (type_identifier) @name) @item.class
(abstract_class_declaration name: (type_identifier) @name) @item.class
(interface_declaration name: (type_identifier) @name) @item.interface
(type_alias_declaration name: (type_identifier) @name) @item.type
(enum_declaration name: (identifier) @name) @item.enum
(internal_module name: (_) @name) @item.module
(method_definition name: (_) @name body: (statement_block) @body) @item.method
(abstract_method_signature name: (_) @name) @item.method
(lexical_declaration (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression)])) @item.function
(arrow_function body: (statement_block) @body)
(function_expression body: (statement_block) @body)
(comment) @comment
