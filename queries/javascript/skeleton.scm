; Skeleton query for JavaScript (see queries/rust/skeleton.scm for the capture names).
(function_declaration name: (identifier) @name body: (statement_block) @body) @item.function
(generator_function_declaration name: (identifier) @name body: (statement_block) @body) @item.function
(class_declaration name: (identifier) @name) @item.class
(method_definition name: (_) @name body: (statement_block) @body) @item.method
(lexical_declaration (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression)])) @item.function
(variable_declaration (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression)])) @item.function
(arrow_function body: (statement_block) @body)
(function_expression body: (statement_block) @body)
(comment) @comment
