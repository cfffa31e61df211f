; Skeleton query for C++ (see queries/rust/skeleton.scm for the capture names).
(function_definition declarator: (function_declarator declarator: (_) @name) body: (compound_statement) @body) @item.function
(function_definition declarator: (reference_declarator (function_declarator declarator: (_) @name)) body: (compound_statement) @body) @item.function
(function_definition declarator: (pointer_declarator declarator: (function_declarator declarator: (_) @name)) body: (compound_statement) @body) @item.function
(function_definition body: (compound_statement) @body) @item.function
(class_specifier name: (_) @name body: (field_declaration_list)) @item.class
(struct_specifier name: (_) @name body: (field_declaration_list)) @item.struct
(union_specifier name: (_) @name body: (field_declaration_list)) @item.struct
(enum_specifier name: (_) @name body: (enumerator_list)) @item.enum
(namespace_definition name: (_) @name) @item.module
(type_definition declarator: (type_identifier) @name) @item.type
(alias_declaration name: (type_identifier) @name) @item.type
(lambda_expression body: (compound_statement) @body)
(comment) @comment
