; Skeleton query for C (see queries/rust/skeleton.scm for the capture names).
(function_definition declarator: (function_declarator declarator: (identifier) @name) body: (compound_statement) @body) @item.function
(function_definition declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name)) body: (compound_statement) @body) @item.function
(function_definition body: (compound_statement) @body) @item.function
(struct_specifier name: (type_identifier) @name body: (field_declaration_list)) @item.struct
(union_specifier name: (type_identifier) @name body: (field_declaration_list)) @item.struct
(enum_specifier name: (type_identifier) @name body: (enumerator_list)) @item.enum
(type_definition declarator: (type_identifier) @name) @item.type
(comment) @comment
